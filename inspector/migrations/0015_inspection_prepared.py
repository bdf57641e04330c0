from django.db import migrations, models
from django.db.models import F
from django.utils import timezone


def prepared_when_created(apps, schema_editor):
    # Every inspection before this migration made its runs when it was created.
    Inspection = apps.get_model("inspector", "Inspection")
    Inspection.objects.update(prepared_at=F("created_at"))


class Migration(migrations.Migration):
    dependencies = [
        ("inspector", "0014_inspection_runs_held"),
    ]

    operations = [
        migrations.AddField(
            model_name="inspection",
            name="prepared_at",
            field=models.DateTimeField(blank=True, default=timezone.now, null=True),
        ),
        migrations.AddField(
            model_name="inspection",
            name="preparer",
            field=models.CharField(blank=True, max_length=200),
        ),
        migrations.RunPython(prepared_when_created, migrations.RunPython.noop),
    ]
