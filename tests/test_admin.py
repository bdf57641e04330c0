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
