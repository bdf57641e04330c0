"""The Django admin as the admins group uses it: add people and put them in a group."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, Permission
from django.core.management import call_command

pytestmark = pytest.mark.django_db


def _add_reviewer(client, username="newcomer", password="a-long-pass-phrase-1"):
    """Adds a person through the admin's two pages, as a browser would."""
    added = client.post(
        "/admin/auth/user/add/",
        {
            "username": username,
            "password1": password,
            "password2": password,
            "usable_password": "true",
        },
    )
    assert added.status_code == 302, added.content.decode()[:2000]
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.get(username=username)
    changed = client.post(
        f"/admin/auth/user/{user.pk}/change/",
        {
            "username": username,
            "first_name": "",
            "last_name": "",
            "email": "",
            "is_active": "on",
            "groups": [Group.objects.get(name="reviewers").pk],
            "is_superuser": "on",  # not the admin's to give: ignored
            "is_staff": "on",
        },
    )
    assert changed.status_code == 302, changed.content.decode()[:2000]
    user.refresh_from_db()
    return user


def test_the_demo_admin_sees_people_and_groups_in_the_django_admin(client):
    call_command("demo_setup", "--no-inspect", stdout=open("/dev/null", "w"))
    assert client.login(username="reviewer", password="inspect-demo")

    page = client.get("/admin/").content.decode()

    assert "have permission to view or edit anything" not in page
    assert "/admin/auth/user/" in page and "/admin/auth/group/" in page
    assert "/admin/inspector/inspection/" in page


def test_an_admin_adds_a_reviewer_who_can_then_triage(lead_client, client):
    user = _add_reviewer(lead_client)

    assert [group.name for group in user.groups.all()] == ["reviewers"]
    assert client.login(username="newcomer", password="a-long-pass-phrase-1")
    assert client.get("/queue/").status_code == 200


def test_an_admin_who_is_not_a_superuser_cannot_make_one(lead_client):
    user = _add_reviewer(lead_client)

    assert not user.is_superuser and not user.is_staff


def test_a_member_of_the_admins_group_opens_the_admin_without_being_staff(client, lead):
    lead.is_staff = False
    lead.save()
    client.force_login(lead)

    assert client.get("/admin/auth/user/").status_code == 200


def test_a_reviewer_is_sent_to_the_login_page_of_the_admin(reviewer_client):
    response = reviewer_client.get("/admin/auth/user/")

    assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_the_inspector_records_are_read_only_in_the_admin(lead_client):
    assert lead_client.get("/admin/inspector/taskset/").status_code == 200
    assert lead_client.get("/admin/inspector/taskset/add/").status_code == 403


def test_a_migrated_database_gives_the_admins_group_its_permissions():
    admins = Group.objects.get(name="admins")
    granted = set(admins.permissions.values_list("content_type__app_label", "codename"))

    assert ("auth", "add_user") in granted and ("auth", "change_user") in granted
    assert ("inspector", "view_run") in granted
    assert not Permission.objects.filter(group__name="reviewers").exists()


# --- Found by an outside attack on the admin ---------------------------------------------------


def test_an_admin_cannot_reset_the_password_of_anyone_with_powers_beyond_the_two_roles(
    lead_client, django_user_model
):
    from django.contrib.auth.models import Permission

    staff = django_user_model.objects.create_user(username="staff", password="x-1", is_staff=True)
    granted = django_user_model.objects.create_user(username="granted", password="x-2")
    granted.user_permissions.add(Permission.objects.get(codename="change_group"))
    other = django_user_model.objects.create_user(username="other", password="x-3")
    other.groups.add(Group.objects.create(name="power"))

    for user in (staff, granted, other):
        response = lead_client.post(
            f"/admin/auth/user/{user.pk}/password/",
            {"password1": "Newpass-123-abc", "password2": "Newpass-123-abc", "usable_password": "true"},
        )  # fmt: skip
        user.refresh_from_db()
        assert response.status_code == 403 and not user.check_password("Newpass-123-abc")
        assert (
            lead_client.post(f"/admin/auth/user/{user.pk}/delete/", {"post": "yes"}).status_code
            == 403
        )


def test_an_admin_hands_out_the_two_roles_only_never_another_group(lead_client, lead):
    power = Group.objects.create(name="power")
    page = lead_client.get(f"/admin/auth/user/{_add_reviewer(lead_client).pk}/change/")

    assert b">reviewers<" in page.content and b">power<" not in page.content
    lead_client.post(
        f"/admin/auth/user/{lead.pk}/change/",
        {"username": "lead", "is_active": "on", "groups": [Group.objects.get(name="admins").pk, power.pk]},
    )  # fmt: skip
    assert not lead.groups.filter(name="power").exists()


def test_an_admin_who_is_not_staff_logs_in_through_the_admin_login_page(client, lead):
    lead.is_staff = False
    lead.save()

    response = client.post(
        "/admin/login/?next=/admin/", {"username": "lead", "password": "lead-pass-1", "next": "/admin/"}
    )  # fmt: skip

    assert response.status_code == 302 and response["Location"] == "/admin/"


def test_an_admin_removes_a_person_who_saved_filters(lead_client, reviewer):
    from inspector.models import SavedFilter

    SavedFilter.objects.create(user=reviewer, name="mine", query="flag=flaky")

    response = lead_client.post(f"/admin/auth/user/{reviewer.pk}/delete/", {"post": "yes"})

    assert (
        response.status_code == 302 and not type(reviewer).objects.filter(pk=reviewer.pk).exists()
    )


def test_an_admin_cannot_revoke_a_superusers_token(lead_client, django_user_model):
    from inspector.models import ApiToken

    root = django_user_model.objects.create_superuser(username="root", password="root-pass-1")
    token = ApiToken.issue(user=root, name="root's")[0]

    one = lead_client.post(f"/admin/inspector/apitoken/{token.pk}/delete/", {"post": "yes"})
    bulk = lead_client.post(
        "/admin/inspector/apitoken/",
        {"action": "delete_selected", "_selected_action": [token.pk], "post": "yes"},
    )

    assert one.status_code == 403 and bulk.status_code in (302, 403)
    assert ApiToken.objects.filter(pk=token.pk).exists()


@pytest.mark.parametrize("odd", ["²", "①", "١"])
def test_a_pin_or_a_filter_in_unicode_digits_is_refused_not_a_server_error(
    odd, lead_client, client, lead_key, import_taskset
):
    import_taskset()

    api = client.get(
        f"/api/v1/tasksets/planted/report.jsonl?inspection={odd}",
        HTTP_AUTHORIZATION=f"Bearer {lead_key}",
    )
    download = lead_client.get(f"/tasksets/planted/manifest.jsonl?inspection={odd}")
    queue = lead_client.get(f"/queue/?taskset=planted&version={odd}&severity={odd}")

    assert api.status_code == 400 and "whole number" in api.json()["error"]
    assert download.status_code == 400
    assert queue.status_code == 200
