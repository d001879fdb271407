from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponsePermanentRedirect
from django.templatetags.static import static
from django.urls import path
from django.views.i18n import set_language

from .api import api
from .proxy import views as proxy_views
from .web import (
    api_keys,
    archives,
    dashboard,
    drift,
    exports,
    health,
    messages,
    notifications,
    runs,
    runs_table,
    sessions,
    summaries,
)
from .web.audit_log import audit_log


@login_not_required
def favicon(request: HttpRequest) -> HttpResponsePermanentRedirect:
    """Browsers ask for /favicon.ico whatever the page links; the link tag names the static file."""
    return HttpResponsePermanentRedirect(static("favicon.svg"))


urlpatterns = [
    path("", sessions.session_list, name="home"),
    path("sessions/<int:pk>/", sessions.session_detail, name="session"),
    path("sessions/<int:pk>/compress", sessions.compress, name="compress"),
    path("runs/", runs_table.runs_table, name="runs"),
    path("runs/export.csv", runs_table.runs_csv, name="runs_csv"),
    path("runs/<int:pk>/", runs.run_detail, name="run"),
    path("runs/<int:pk>/progress", sessions.run_progress, name="run_progress"),
    path("runs/<int:pk>/diff", runs.run_diff, name="run_diff"),
    path("messages/<str:sha256>/", messages.message_detail, name="message"),
    path("archives/<int:pk>/", archives.archive_detail, name="archive"),
    path("archives/<int:pk>/resummarize", archives.resummarize, name="resummarize"),
    path("archives/<int:pk>/compare", archives.compare, name="compare"),
    path("archives/<int:pk>/compare/review", archives.review_pair, name="review_pair"),
    path("summaries/<int:pk>/", summaries.summary_detail, name="summary"),
    path("summaries/<int:pk>/progress", summaries.summary_progress, name="summary_progress"),
    path("summaries/<int:pk>/promote", summaries.promote, name="promote"),
    path("summaries/<int:pk>/drift-check", summaries.drift_check_retry, name="drift_check_retry"),
    path("summaries/<int:pk>/open-case", drift.open_case, name="open_case"),
    path("drift/", drift.queue, name="drift_queue"),
    path("drift/export.jsonl", drift.export, name="drift_export"),
    path("drift/bulk", drift.bulk, name="drift_bulk"),
    path("drift/<int:pk>/", drift.case_detail, name="drift_case"),
    path("drift/<int:pk>/update", drift.update_case, name="drift_update"),
    path("drift/<int:pk>/comment", drift.comment, name="drift_comment"),
    path("dashboard/", dashboard.dashboard, name="dashboard"),
    path("dashboard/runs/", dashboard.runs_list, name="dashboard_runs"),
    path("sessions/<int:pk>/export.json", exports.session_export, name="session_export"),
    path("exports/session", exports.session_download, name="session_download"),
    path("audit/", audit_log, name="audit_log"),
    path("inbox/", notifications.inbox, name="inbox"),
    path("inbox/read", notifications.mark_all_read, name="inbox_read"),
    path("inbox/<int:pk>/open", notifications.open_notification, name="notification_open"),
    path("settings/webhooks/", notifications.webhooks, name="webhooks"),
    path("settings/webhooks/<int:pk>/", notifications.webhook_detail, name="webhook"),
    path("settings/api-keys/", api_keys.api_keys, name="api_keys"),
    path("favicon.ico", favicon),
    path("healthz", health.healthz, name="healthz"),
    path("login/", auth_views.LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    # the language switch works on the login page too
    path("i18n/setlang/", login_not_required(set_language), name="set_language"),
    path("admin/", admin.site.urls),
    path("api/v1/", api.urls),
    path("proxy/v1/chat/completions", proxy_views.chat_completions, name="proxy_chat_completions"),
    path("proxy/v1/models", proxy_views.models, name="proxy_models"),
]
