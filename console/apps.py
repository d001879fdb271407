from django.apps import AppConfig
from django.db.models.signals import post_migrate


class ConsoleConfig(AppConfig):
    name = "console"
    verbose_name = "Compression console"

    def ready(self) -> None:
        from . import tasks  # noqa: F401  (registers the tasks, so queue's sends by name run them eagerly when asked)
        from .roles import sync_role_groups
        from .template_masking import install_template_masking

        post_migrate.connect(sync_role_groups, sender=self)
        install_template_masking()
