"""Admin: a look at the raw rows. Workflows (compress, promote, review) happen in the console, which audits them,
so immutable and worker-written rows are view-only here, and drift case edits go through the same service."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.auth import get_user_model

from .apikeys import revoke_api_key
from .errors import ArchiveCorrupted, ServiceError
from .models import (
    ApiKey,
    Archive,
    AuditEvent,
    CompressionRun,
    DriftCase,
    DriftComment,
    Notification,
    Session,
    Summary,
    Webhook,
    WebhookAttempt,
    WebhookDelivery,
)
from .reveal import may_reveal
from .services.drift import update_drift_case
from .services.notifications import EVENTS, create_webhook, delete_webhook, update_webhook


@admin.register(Session)
class SessionAdmin(admin.ModelAdmin):
    list_display = ["key", "channel", "status", "message_count", "token_count", "version", "updated_at"]
    list_filter = ["channel", "status"]
    search_fields = ["key"]
    readonly_fields = ["version", "message_count", "token_count", "created_at", "updated_at"]


class ViewOnly(admin.ModelAdmin):
    """No add, change or delete: the rows are immutable or belong to the workers."""

    def has_add_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        return False


@admin.register(CompressionRun)
class CompressionRunAdmin(ViewOnly):
    list_display = ["id", "session", "trigger", "status", "applied", "tokens_before", "tokens_after", "created_at"]
    list_filter = ["status", "trigger"]
    search_fields = ["session__key"]
    list_select_related = ["session"]
    exclude = ["input_keys", "output_keys"]  # thousands of hashes; the counts say more here
    readonly_fields = ["input_messages", "output_messages"]

    @admin.display(description="input messages")
    def input_messages(self, obj: CompressionRun) -> int:
        return len(obj.input_keys)

    @admin.display(description="output messages")
    def output_messages(self, obj: CompressionRun) -> int:
        return len(obj.output_keys)


@admin.register(Archive)
class ArchiveAdmin(ViewOnly):
    list_display = ["id", "session", "run", "start", "end", "sha256", "created_at"]
    search_fields = ["session__key", "sha256", "inserted_id"]
    list_select_related = ["session"]
    exclude = ["message_keys"]
    readonly_fields = ["verified"]

    @admin.display(description="originals match sha256")
    def verified(self, obj: Archive) -> str:
        try:
            obj.verified_messages()
        except ArchiveCorrupted as exc:
            return f"NO: {exc}"
        return "yes"


@admin.register(Summary)
class SummaryAdmin(ViewOnly):
    list_display = ["summary_id", "archive", "status", "parent", "created_by", "created_at"]
    list_filter = ["status"]
    search_fields = ["summary_id", "text"]
    list_select_related = ["archive", "parent", "created_by"]


@admin.register(AuditEvent)
class AuditEventAdmin(ViewOnly):
    """Append-only, for superusers too: no add, change, delete, nor any bulk action."""

    list_display = ["created_at", "actor_label", "action", "object_type", "object_id"]
    list_filter = ["action", "object_type"]
    search_fields = ["actor_label", "object_id"]
    actions = None


class DriftCommentInline(admin.TabularInline):
    model = DriftComment
    fields = readonly_fields = ("author", "body", "quote", "created_at")
    extra = 0
    can_delete = False

    def has_add_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False


class DriftCaseForm(forms.ModelForm):
    class Meta:
        model = DriftCase
        fields = ["status", "assignee", "verdict"]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        old, new = self.initial.get("status"), data.get("status")
        if old and new and new != old and new not in DriftCase.TRANSITIONS[old]:
            allowed = ", ".join(sorted(DriftCase.TRANSITIONS[old]))
            self.add_error("status", f"a {old} case cannot become {new}; it can become: {allowed}")
        if new in (DriftCase.Status.CONFIRMED, DriftCase.Status.DISMISSED) and not (data.get("verdict") or "").strip():
            self.add_error("verdict", f"a {new} case needs a verdict saying why")
        return data


@admin.register(DriftCase)
class DriftCaseAdmin(admin.ModelAdmin):
    form = DriftCaseForm
    list_display = ["id", "session", "summary", "severity", "status", "assignee", "updated_at"]
    list_filter = ["status", "severity"]
    search_fields = ["session__key", "summary__summary_id"]
    list_select_related = ["session", "summary", "assignee"]
    readonly_fields = ["session", "summary", "severity", "findings", "opened_by", "created_at", "updated_at"]
    inlines = [DriftCommentInline]

    def has_add_permission(self, request: Any, obj: Any = None) -> bool:
        return False  # drift checks open cases

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def formfield_for_foreignkey(self, db_field: Any, request: Any, **kwargs: Any) -> Any:
        if db_field.name == "assignee":
            kwargs["queryset"] = get_user_model().objects.filter(is_active=True)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def save_model(self, request: Any, obj: DriftCase, form: Any, change: bool) -> None:
        # through the service, so the change is checked and audited like one made in the console
        assignee = obj.assignee.get_username() if obj.assignee else None
        update_drift_case(obj.pk, {"status": obj.status, "assignee": assignee, "verdict": obj.verdict}, request.user)


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    """Keys are created with ``manage.py create_api_key`` (the key is shown once); here they are listed and revoked."""

    list_display = ["name", "user", "created_at", "last_used_at", "revoked_at"]
    list_filter = [("revoked_at", admin.EmptyFieldListFilter)]
    search_fields = ["name"]
    list_select_related = ["user"]
    fields = readonly_fields = ("name", "user", "lookup", "created_at", "last_used_at", "revoked_at")
    actions = ["revoke"]

    def has_add_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        return False  # revoke instead: the audit log keeps pointing at the key

    @admin.action(description="Revoke the selected keys", permissions=["change"])
    def revoke(self, request: Any, queryset: Any) -> None:
        revoked = []
        for api_key in queryset:
            try:
                if revoke_api_key(api_key.name, user=request.user)[1]:
                    revoked.append(api_key.name)
            except ServiceError as exc:
                self.message_user(request, str(exc), messages.ERROR)
        self.message_user(request, f"Revoked {len(revoked)} key(s): {', '.join(revoked) or 'none'}")


# --------------------------------------------------------------------------- notifications


class WebhookForm(forms.ModelForm):
    url = forms.URLField(max_length=2000, assume_scheme="https")
    events = forms.MultipleChoiceField(choices=list(EVENTS.items()), widget=forms.CheckboxSelectMultiple)

    class Meta:
        model = Webhook
        fields = ["name", "url", "format", "events", "active"]


@admin.register(Webhook)
class WebhookAdmin(admin.ModelAdmin):
    """Created, changed and removed through the same service as the console's page (checked and audited)."""

    form = WebhookForm
    list_display = ["name", "url", "format", "active", "updated_at"]
    list_filter = ["format", "active"]
    search_fields = ["name", "url"]
    readonly_fields = ["created_by", "created_at", "updated_at"]

    def save_model(self, request: Any, obj: Webhook, form: Any, change: bool) -> None:
        data = {k: form.cleaned_data[k] for k in ("name", "url", "format", "events", "active")}
        if change:
            update_webhook(obj.pk, data, request.user)
        else:
            obj.pk = create_webhook(**data, user=request.user).pk

    def delete_model(self, request: Any, obj: Webhook) -> None:
        delete_webhook(obj.pk, request.user)

    def delete_queryset(self, request: Any, queryset: Any) -> None:
        for webhook in queryset:
            delete_webhook(webhook.pk, request.user)


class WebhookAttemptInline(admin.TabularInline):
    model = WebhookAttempt
    fields = readonly_fields = ("number", "status_code", "error", "duration_ms", "started_at")
    extra = 0
    can_delete = False

    def has_add_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(ViewOnly):
    list_display = ["delivery_id", "webhook", "event", "status", "attempts", "next_attempt_at", "created_at"]
    list_filter = ["status", "event"]
    search_fields = ["delivery_id"]
    list_select_related = ["webhook"]
    inlines = [WebhookAttemptInline]


@admin.register(Notification)
class NotificationAdmin(ViewOnly):
    list_display = ["created_at", "recipient", "kind", "actor_label", "read_at"]
    list_filter = ["kind"]
    list_select_related = ["recipient"]


def _may_use_admin(request: Any) -> bool:
    """The admin shows and edits raw rows, secrets unmasked: staff who may reveal them only."""
    return bool(request.user.is_active and request.user.is_staff and may_reveal(request.user))


admin.site.has_permission = _may_use_admin  # type: ignore[method-assign]
