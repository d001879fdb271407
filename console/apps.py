from django.apps import AppConfig
from django.db.models.signals import post_migrate


class ConsoleConfig(AppConfig):
    name = "console"
    verbose_name = "Compression console"

    def ready(self) -> None:
        from django.contrib.auth.signals import user_login_failed

        from . import tasks  # noqa: F401  (registers the tasks, so queue's sends by name run them eagerly when asked)
        from .roles import sync_role_groups
        from .template_masking import install_template_masking
        from .throttling import count_failed_login

        post_migrate.connect(sync_role_groups, sender=self)
        install_template_masking()
        user_login_failed.connect(count_failed_login, dispatch_uid="console.count_failed_login")
