"""The console's forms: compress (with per-run overrides), re-summarize, review and comment on a drift
case, open a case by hand. Views validate with them; templates render them with ``_form_fields.html``."""

from __future__ import annotations

from typing import Any

from django import forms
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from ..errors import ServiceError
from ..models import DriftCase, PairwiseReview, Session
from ..services.summarizer_factory import PROMPT_VERSIONS, default_summarizer_name
from ..services.validation import session_config
from .labels import FINDING_KINDS, SEVERITIES


def focus_topic_field(**options: Any) -> forms.CharField:
    """The optional focus topic a compression or a re-summarize passes to the summarizer."""
    return forms.CharField(
        label=gettext_lazy("Focus topic"),
        required=False,
        max_length=2000,
        help_text=gettext_lazy("What the summary should favour, e.g. the user's current request."),
        **options,
    )


class CompressForm(forms.Form):
    """Focus topic and optional per-run overrides of CompressionConfig (only filled-in ones are sent)."""

    OVERRIDES = ("context_window_tokens", "trigger_ratio", "tail_tokens", "protect_head_messages", "summary_max_tokens")

    focus_topic = focus_topic_field()
    context_window_tokens = forms.IntegerField(
        label=gettext_lazy("Context window (tokens)"), required=False, min_value=256, max_value=10_000_000
    )
    trigger_ratio = forms.FloatField(label=gettext_lazy("Trigger ratio"), required=False, min_value=0.05, max_value=1)
    tail_tokens = forms.IntegerField(label=gettext_lazy("Tail kept verbatim (tokens)"), required=False, min_value=0)
    protect_head_messages = forms.IntegerField(
        label=gettext_lazy("Protected head (messages)"), required=False, min_value=0, max_value=10_000
    )
    summary_max_tokens = forms.IntegerField(
        label=gettext_lazy("Summary budget (tokens)"), required=False, min_value=0, max_value=1_000_000
    )

    def __init__(self, *args: Any, session: Session, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        try:
            config = session_config(session)
        except ServiceError:
            return
        defaults = {
            "context_window_tokens": config.context_window_tokens,
            "trigger_ratio": config.trigger_ratio,
            "tail_tokens": config.effective_tail_tokens,
            "protect_head_messages": config.protect_head_messages,
            "summary_max_tokens": config.effective_summary_max_tokens,
        }
        for name, value in defaults.items():
            self.fields[name].widget.attrs["placeholder"] = str(value)
        self.fields["trigger_ratio"].widget.attrs["step"] = "0.01"

    def overrides(self) -> dict[str, Any]:
        return {name: self.cleaned_data[name] for name in self.OVERRIDES if self.cleaned_data.get(name) is not None}

    @property
    def overrides_open(self) -> bool:
        """Keep the overrides section open when one of them is filled in or wrong."""
        return any(self[name].value() not in (None, "") or self[name].errors for name in self.OVERRIDES)


class ResummarizeForm(forms.Form):
    summarizer = forms.ChoiceField(label=gettext_lazy("Summarizer"))
    model = forms.CharField(
        label=gettext_lazy("Model"),
        required=False,
        max_length=200,
        help_text=gettext_lazy("Optional; empty uses the configured model. The extractive summarizer uses none."),
    )
    focus_topic = focus_topic_field(widget=forms.Textarea(attrs={"rows": 2}))
    prompt_version = forms.ChoiceField(
        label=gettext_lazy("Prompt version"),
        required=False,
        help_text=gettext_lazy("Empty uses the summarizer's current version."),
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        summarizer = self.fields["summarizer"]
        prompt_version = self.fields["prompt_version"]
        assert isinstance(summarizer, forms.ChoiceField) and isinstance(prompt_version, forms.ChoiceField)
        summarizer.choices = [(name, name) for name in PROMPT_VERSIONS]
        summarizer.initial = default_summarizer_name()
        versions: list[tuple[str, str]] = [("", _("current version"))]
        for name, names in PROMPT_VERSIONS.items():
            versions.extend((v, f"{v} ({name})") for v in names)
        prompt_version.choices = versions


class ReviewForm(forms.Form):
    status = forms.ChoiceField(label=gettext_lazy("Status"), choices=DriftCase.Status.choices)
    verdict = forms.CharField(
        label=gettext_lazy("Verdict: why"),
        required=False,
        max_length=4000,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text=gettext_lazy("Needed to confirm or dismiss: what the summary got wrong, or why it is fine."),
    )


class BulkForm(forms.Form):
    """Several cases of the queue at once: claim them, assign them, or dismiss them with one verdict."""

    action = forms.ChoiceField(
        choices=[
            ("claim", gettext_lazy("Claim")),
            ("assign", gettext_lazy("Assign")),
            ("dismiss", gettext_lazy("Dismiss")),
        ]
    )
    assignee = forms.CharField(label=gettext_lazy("Assign to"), required=False, max_length=150)
    verdict = forms.CharField(label=gettext_lazy("Verdict: why"), required=False, max_length=4000)

    @staticmethod
    def case_ids(data: Any) -> list[int]:
        """The ticked cases (``case`` checkboxes); anything not a row id is dropped."""
        return [int(v) for v in data.getlist("case") if v.isdigit() and len(v) < 19]


class PairwiseForm(forms.Form):
    """The compare page's verdict on versions A and B."""

    a = forms.IntegerField(widget=forms.HiddenInput, min_value=1)
    b = forms.IntegerField(widget=forms.HiddenInput, min_value=1)
    verdict = forms.ChoiceField(
        label=gettext_lazy("Which version is better?"),
        choices=PairwiseReview.Verdict.choices,
        widget=forms.RadioSelect,
        error_messages={"required": gettext_lazy("Pick a verdict.")},
    )
    note = forms.CharField(
        label=gettext_lazy("Note"),
        required=False,
        max_length=4000,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text=gettext_lazy("What decided it (needed when both are wrong)."),
    )


class CommentForm(forms.Form):
    quote = forms.CharField(
        label=gettext_lazy("Quoted passage"),
        required=False,
        max_length=4000,
        widget=forms.Textarea(attrs={"rows": 2, "data-quote-target": ""}),
        help_text=gettext_lazy("Select text in the evidence or the summary to quote it here."),
    )
    body = forms.CharField(
        label=gettext_lazy("Comment"),
        max_length=20000,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text=gettext_lazy("Mention a teammate with @username."),
    )


class OpenCaseForm(forms.Form):
    quote = forms.CharField(
        label=gettext_lazy("The passage in question"),
        max_length=4000,
        widget=forms.Textarea(attrs={"rows": 3, "data-quote-target": ""}),
        help_text=gettext_lazy("Select it in the summary text, or paste it as shown."),
    )
    kind = forms.ChoiceField(label=gettext_lazy("Kind"), choices=list(FINDING_KINDS.items()), initial="other")
    severity = forms.ChoiceField(label=gettext_lazy("Severity"), choices=list(SEVERITIES.items()), initial="medium")
    note = forms.CharField(
        label=gettext_lazy("What is wrong"),
        required=False,
        max_length=4000,
        widget=forms.Textarea(attrs={"rows": 2}),
    )


class ApiKeyForm(forms.Form):
    """A new API key: a name for the runtime that will use it, and the role it acts in."""

    name = forms.CharField(
        label=gettext_lazy("Name"),
        max_length=100,
        help_text=gettext_lazy("Who uses it, e.g. the agent runtime's name: letters, digits and . @ + - _"),
    )
    role = forms.ChoiceField(
        label=gettext_lazy("Role"),
        choices=[
            ("viewer", gettext_lazy("viewer")),
            ("operator", gettext_lazy("operator")),
            ("reviewer", gettext_lazy("reviewer")),
            ("admin", gettext_lazy("admin")),
        ],
        initial="operator",
    )
