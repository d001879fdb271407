from django.contrib import admin

from .models import Session


@admin.register(Session)
class SessionAdmin(admin.ModelAdmin):
    list_display = ["key", "channel", "status", "message_count", "token_count", "version", "updated_at"]
    list_filter = ["channel", "status"]
    search_fields = ["key"]
    readonly_fields = ["version", "message_count", "token_count", "created_at", "updated_at"]
