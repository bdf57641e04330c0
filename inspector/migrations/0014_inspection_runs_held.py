from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("inspector", "0013_run_repo_kinds"),
    ]

    operations = [
        migrations.AddField(
            model_name="inspection",
            name="runs_held",
            field=models.BooleanField(default=False),
        ),
    ]
