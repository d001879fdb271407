"""Settings, read from environment variables.

Every variable is documented in `.env.example`. The helpers below fail loudly,
naming the variable, when a value cannot be understood: a typo in production
configuration must stop start-up, not be silently replaced by a default.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import urlparse

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from django.utils.translation import gettext_lazy as _

BASE_DIR = Path(__file__).resolve().parent.parent


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean: use true or false")


def env_int(name: str, default: int, minimum: int = 0) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a whole number") from None
    if value < minimum:
        raise ImproperlyConfigured(f"{name}={raw!r} must be at least {minimum}")
    return value


def env_float(name: str, default: float, minimum: float = 0.0) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a number") from None
    if value < minimum:
        raise ImproperlyConfigured(f"{name}={raw!r} must be at least {minimum}")
    return value


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in env_str(name, default).split(",") if item.strip()]


def env_url(name: str, schemes: set[str]) -> str:
    raw = env_str(name).strip()
    if not raw:
        return ""
    parsed = urlparse(raw)
    if parsed.scheme not in schemes or not (parsed.netloc or parsed.path):
        allowed = ", ".join(sorted(schemes))
        raise ImproperlyConfigured(f"{name}={raw!r} is not a valid URL (expected a scheme among: {allowed})")
    return raw


def env_prices(name: str) -> dict[str, dict[str, float]]:
    """``{"model": {"input": 0.15, "output": 0.6}}``: a price per 1,000 input and output tokens for each model."""
    raw = env_str(name).strip()
    if not raw:
        return {}
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} is not JSON ({exc}): expected {PRICES_EXAMPLE}") from None
    if not isinstance(data, dict):
        raise ImproperlyConfigured(f"{name} must be a JSON object of models, e.g. {PRICES_EXAMPLE}")
    prices: dict[str, dict[str, float]] = {}
    for model, price in data.items():
        if not isinstance(price, dict) or set(price) - {"input", "output"} or not price:
            raise ImproperlyConfigured(f"{name}: {model!r} must map to {{'input': ..., 'output': ...}} (per 1k tokens)")
        for side, value in price.items():
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ImproperlyConfigured(f"{name}: {model!r} {side} price {value!r} is not a number >= 0")
        prices[str(model)] = {"input": float(price.get("input", 0)), "output": float(price.get("output", 0))}
    return prices


PRICES_EXAMPLE = '{"gpt-4o-mini": {"input": 0.00015, "output": 0.0006}}'


def database_config(url: str) -> dict:
    try:
        config = dj_database_url.parse(url, conn_max_age=60, conn_health_checks=True)
    except Exception as exc:
        raise ImproperlyConfigured(f"DATABASE_URL={url!r} is not a valid database URL: {exc}") from None
    if not config.get("ENGINE") or (config["ENGINE"] != "django.db.backends.sqlite3" and not config.get("NAME")):
        raise ImproperlyConfigured(f"DATABASE_URL={url!r} names no database")
    return dict(config)


# Local state of the embedded mode (SQLite file, filesystem broker) lives here.
VAR_DIR = Path(env_str("VAR_DIR") or BASE_DIR / "var")

DEBUG = env_bool("DEBUG", True)
SECRET_KEY = env_str("SECRET_KEY")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is false")
    SECRET_KEY = "dev-only-insecure-key-do-not-use-in-production"
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "django_htmx",
    "template_partials",
    "ninja",  # serves the API docs' Swagger UI from its own static files (no CDN)
    "axes",
    "csp",
    "console",
]

MIDDLEWARE = [
    "console.middleware.DatabaseUnavailableMiddleware",  # outermost: sees the 500 of an outage anywhere below
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "console.input_checks.RefuseUnstorableInputMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "console.middleware.PagesLoginRequiredMiddleware",
    "console.reveal.RevealScopeMiddleware",  # each request starts masked (console.reveal)
    "console.middleware.ApiJsonErrorsMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "csp.middleware.CSPMiddleware",
    "console.headers.SecurityHeadersMiddleware",
    "axes.middleware.AxesMiddleware",  # last, as django-axes asks
]

ROOT_URLCONF = "console.urls"
WSGI_APPLICATION = "console.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.i18n",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
            # every page writes times with ``|when`` and counts with ``|intcomma``
            "builtins": [
                "console.templatetags.when",
                "console.templatetags.vocabulary",
                "django.contrib.humanize.templatetags.humanize",
            ],
        },
    },
]

DATABASE_URL = env_str("DATABASE_URL")
if not DATABASE_URL:
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    DATABASE_URL = f"sqlite:///{VAR_DIR / 'console.sqlite3'}"
DATABASES = {"default": database_config(DATABASE_URL)}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # A worker and the web server share the file: wait for locks instead of failing.
    DATABASES["default"].setdefault("OPTIONS", {}).update({"timeout": 20, "transaction_mode": "IMMEDIATE"})
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    # A file, not memory, so that a worker process started by a test sees the test database
    # (tests hand workers its path); one per test process, so two runs at once do not collide.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"test-console-{os.getpid()}.sqlite3")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTHENTICATION_BACKENDS = [
    "console.throttling.LoginLockoutBackend",  # django-axes: refuses a locked-out login before checking it
    "django.contrib.auth.backends.ModelBackend",
]
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en"
LANGUAGES = [("en", _("English")), ("zh-hans", _("Simplified Chinese"))]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = env_str("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True
#: one timestamp format per language and thousands grouped in both (console/formats/); pages write every
#: time with the ``when`` filter (console/templatetags/when.py) and every count with ``intcomma``
FORMAT_MODULE_PATH = ["console.formats"]

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = BASE_DIR / "staticfiles"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG
        else "whitenoise.storage.CompressedManifestStaticFilesStorage"
    },
}

# Real sessions run to tens of megabytes; past this limit a request gets 413, not a 500.
MAX_REQUEST_BYTES = env_int("MAX_REQUEST_BYTES", 64 * 1024 * 1024, minimum=1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = MAX_REQUEST_BYTES
DATA_UPLOAD_MAX_NUMBER_FIELDS = 10_000

# Summarizer: an OpenAI-compatible endpoint, or the offline extractive summarizer when unset.
OPENAI_BASE_URL = env_url("OPENAI_BASE_URL", {"http", "https"})
OPENAI_API_KEY = env_str("OPENAI_API_KEY")
SUMMARY_MODEL = env_str("SUMMARY_MODEL", "gpt-4o-mini")
#: price per 1,000 input / output tokens by model, for the dashboard's cost of summarizer calls (JSON; the
#: extractive summarizer costs nothing; a model without a price is shown as unpriced)
SUMMARIZER_PRICES = env_prices("SUMMARIZER_PRICES")
SUMMARIZER_PRICE_CURRENCY = env_str("SUMMARIZER_PRICE_CURRENCY", "USD")
SUMMARY_TIMEOUT = env_float("SUMMARY_TIMEOUT", 60.0, minimum=1.0)
SUMMARY_MAX_RETRIES = env_int("SUMMARY_MAX_RETRIES", 1)
#: seconds to stop calling an endpoint after it failed (a 429's Retry-After wins); shared by all workers
SUMMARY_COOLDOWN_SECONDS = env_float("SUMMARY_COOLDOWN_SECONDS", 120.0, minimum=0.0)

# Proxy mode (console/proxy/): runtimes point their OpenAI base URL at /proxy/v1
#: the OpenAI-compatible endpoint calls are relayed to, and its key (default: the summarizer's endpoint and key)
PROXY_UPSTREAM_BASE_URL = env_url("PROXY_UPSTREAM_BASE_URL", {"http", "https"}) or OPENAI_BASE_URL
PROXY_UPSTREAM_API_KEY = env_str("PROXY_UPSTREAM_API_KEY") or OPENAI_API_KEY
#: seconds an upstream call may take (a long generation streams for minutes)
PROXY_UPSTREAM_TIMEOUT = env_float("PROXY_UPSTREAM_TIMEOUT", 600.0, minimum=1.0)
#: how long a call waits for a compression in its own request path; past it, the history goes as it is
#: and the compression finishes for the next call
PROXY_COMPRESS_BUDGET_MS = env_int("PROXY_COMPRESS_BUDGET_MS", 2000, minimum=0)
#: the summarizer of compressions in the request path: the offline extractive one (fast), or "openai"
PROXY_SUMMARIZER = env_str("PROXY_SUMMARIZER", "extractive")
if PROXY_SUMMARIZER not in ("extractive", "openai"):
    raise ImproperlyConfigured(f"PROXY_SUMMARIZER={PROXY_SUMMARIZER!r} must be 'extractive' or 'openai'")
#: the context window of a session the proxy creates without an X-Context-Window-Tokens header
PROXY_CONTEXT_WINDOW_TOKENS = env_int("PROXY_CONTEXT_WINDOW_TOKENS", 128_000, minimum=256)
#: seconds a verified API key is trusted without asking the database again (a revocation takes this long)
PROXY_AUTH_CACHE_SECONDS = env_float("PROXY_AUTH_CACHE_SECONDS", 30.0, minimum=0.0)
#: the MCP server (manage.py mcp) serves the archive; summaries then tell the agent how to read it back
MCP_ENABLED = env_bool("MCP_ENABLED", False)

# Compression runs
#: queue a run when appends push a session past its trigger ratio
AUTO_COMPRESS = env_bool("AUTO_COMPRESS", True)
#: a running run refreshes its heartbeat this often; one silent for RUN_STALE_SECONDS lost its worker
RUN_HEARTBEAT_SECONDS = env_float("RUN_HEARTBEAT_SECONDS", 15.0, minimum=0.1)
RUN_STALE_SECONDS = env_float("RUN_STALE_SECONDS", 120.0, minimum=1.0)
#: tries before a run whose worker keeps dying is failed
RUN_MAX_ATTEMPTS = env_int("RUN_MAX_ATTEMPTS", 3, minimum=1)
#: drift checks of one summary that may fail (raise, or lose their worker) before it is marked failed
DRIFT_CHECK_MAX_ATTEMPTS = env_int("DRIFT_CHECK_MAX_ATTEMPTS", 3, minimum=1)
#: the longest `wait` a compress request may block for
COMPRESS_WAIT_MAX_SECONDS = env_float("COMPRESS_WAIT_MAX_SECONDS", 90.0, minimum=0.0)
#: drift findings at or above this severity open a drift case by themselves
DRIFT_CASE_MIN_SEVERITY = env_str("DRIFT_CASE_MIN_SEVERITY", "high")
if DRIFT_CASE_MIN_SEVERITY not in ("low", "medium", "high"):
    raise ImproperlyConfigured(f"DRIFT_CASE_MIN_SEVERITY={DRIFT_CASE_MIN_SEVERITY!r} must be low, medium or high")

# Celery: Redis when REDIS_URL is set, otherwise kombu's filesystem transport under VAR_DIR,
# so the embedded mode needs no server.
REDIS_URL = env_url("REDIS_URL", {"redis", "rediss"})
CELERY_BROKER_DIR = VAR_DIR / "celery-broker"
CELERY_RESULTS_DIR = VAR_DIR / "celery-results"
if REDIS_URL:
    CELERY_BROKER_URL = REDIS_URL
    CELERY_RESULT_BACKEND = REDIS_URL
    CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {"visibility_timeout": 3600}
else:
    CELERY_BROKER_URL = "filesystem://"
    CELERY_RESULT_BACKEND = f"file://{CELERY_RESULTS_DIR}"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(CELERY_BROKER_DIR),
        "data_folder_out": str(CELERY_BROKER_DIR),
        "control_folder": str(CELERY_BROKER_DIR / "control"),
        "store_processed": False,
    }
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_RESULT_EXPIRES = 3600
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 600, minimum=1)
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", CELERY_TASK_SOFT_TIME_LIMIT + 60, minimum=1)
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_ACKS_LATE = False  # a run is recovered from the database, not by redelivery
# with acks_late off this cancels nothing; it says what Celery 6 will do by default (and silences its warning)
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = True
if REDIS_URL:
    # kombu's Redis transport with the fix that keeps a worker alive when Redis restarts (console/broker.py)
    CELERY_BROKER_TRANSPORT = "console.broker:Transport"

# Queueing and recovery (console/services/queue.py sends every task; the sweep re-sends what was lost)
#: how often beat runs the recovery sweep over runs, re-summarizes and drift checks
RECOVERY_SWEEP_SECONDS = env_float("RECOVERY_SWEEP_SECONDS", 20.0, minimum=1.0)
#: queued work whose task was sent this long ago and not picked up is sent again; the wait doubles with
#: each re-send (up to RESEND_MAX_SECONDS), so a busy queue does not fill with duplicates. Work whose send
#: failed (broker down) is sent at the next sweep.
RUN_QUEUED_RESEND_SECONDS = env_float("RUN_QUEUED_RESEND_SECONDS", 40.0, minimum=1.0)
RESEND_MAX_SECONDS = env_float("RESEND_MAX_SECONDS", 600.0, minimum=1.0)
#: the longest a request waits for the broker to take a task; past it the work stays queued for the sweep
BROKER_SEND_TIMEOUT = env_float("BROKER_SEND_TIMEOUT", 2.0, minimum=0.1)
CELERY_BROKER_CONNECTION_TIMEOUT = BROKER_SEND_TIMEOUT
CELERY_REDIS_SOCKET_CONNECT_TIMEOUT = BROKER_SEND_TIMEOUT
#: one quick retry covers a pooled connection the broker dropped; never a long back-off inside a request
CELERY_TASK_PUBLISH_RETRY_POLICY = {"max_retries": 1, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.2}
if REDIS_URL:
    CELERY_BROKER_TRANSPORT_OPTIONS["socket_connect_timeout"] = BROKER_SEND_TIMEOUT
#: a compression that would only lose its summary waits out the summarizer's cooldown, this long at most
COOLDOWN_WAIT_MAX_SECONDS = env_float("COOLDOWN_WAIT_MAX_SECONDS", 900.0, minimum=0.0)
#: compress requests blocking with `wait` at once, per web process; past it they get 429 (threads stay free)
MAX_COMPRESS_WAITERS = env_int("MAX_COMPRESS_WAITERS", 4, minimum=0)
#: what a 503 during a database outage tells clients to wait before retrying
DATABASE_RETRY_AFTER_SECONDS = env_int("DATABASE_RETRY_AFTER_SECONDS", 5, minimum=1)
# Outgoing webhooks (console/services/notifications.py): retried with a doubling wait, bounded in tries and in wait
WEBHOOK_MAX_ATTEMPTS = env_int("WEBHOOK_MAX_ATTEMPTS", 6, minimum=1)
WEBHOOK_RETRY_SECONDS = env_float("WEBHOOK_RETRY_SECONDS", 10.0, minimum=0.0)
WEBHOOK_RETRY_MAX_SECONDS = env_float("WEBHOOK_RETRY_MAX_SECONDS", 900.0, minimum=0.0)
WEBHOOK_TIMEOUT = env_float("WEBHOOK_TIMEOUT", 10.0, minimum=0.1)
#: webhooks go to public addresses only (console/services/egress.py); these host names (as written in the URL;
#: ".internal" for a domain and its subdomains) may be private receivers
WEBHOOK_ALLOWED_HOSTS = env_list("WEBHOOK_ALLOWED_HOSTS", "")
#: the console's address as receivers should link to it (empty: payloads carry paths only)
CONSOLE_URL = env_url("CONSOLE_URL", {"http", "https"}).rstrip("/")
CELERY_BEAT_SCHEDULE = {
    "recover": {"task": "console.recover", "schedule": RECOVERY_SWEEP_SECONDS},
}

# Every line is masked on its way out (console.log_masking.MaskSecretsFilter): Django's own loggers (requests,
# the dev server) go through the root's handler instead of Django's default ones, which would bypass it.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"mask_secrets": {"()": "console.log_masking.MaskSecretsFilter"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "filters": ["mask_secrets"]}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {
        "django": {"handlers": [], "propagate": True},
        "django.server": {"handlers": [], "propagate": True},
        "django.db.backends": {"level": "WARNING"},
    },
}

# --------------------------------------------------------------------------- throttling and security headers
# Counters (API rate limits, login lockout) live in this cache, shared by every web process: Redis in
# production, local memory in the embedded mode (one web process). While Redis is unreachable each process
# counts in its own memory (console.cache), retrying Redis every CACHE_RETRY_SECONDS: never an error.
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "console.cache.FallbackRedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": "console",
            "FALLBACK_SECONDS": env_float("CACHE_RETRY_SECONDS", 10.0, minimum=0.1),
            # a cache that does not answer at once is treated as down: no request waits on it
            "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 1.0},
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "KEY_PREFIX": "console"}}


def env_rate(name: str, default: str) -> str:
    """A rate such as ``600/min`` (``s``, ``min``, ``h``, ``day``); empty or ``off`` turns the limit off."""
    raw = env_str(name, default).strip()
    if raw.lower() in ("", "off"):
        return ""
    count, _, period = raw.partition("/")
    if not (count.isdigit() and int(count) > 0 and period in ("s", "sec", "m", "min", "h", "hour", "d", "day")):
        raise ImproperlyConfigured(f"{name}={raw!r} is not a rate: write it as 600/min (per s, min, hour or day)")
    return raw


#: requests per API key (or logged-in user); past it 429 with Retry-After
API_RATE_LIMIT = env_rate("API_RATE_LIMIT", "1200/min")
#: failed API authentications per client IP; past it every bearer request from that IP gets 429
API_AUTH_FAILURE_LIMIT = env_rate("API_AUTH_FAILURE_LIMIT", "20/min")
#: failed logins per client address, whatever the usernames (password spraying); past it the login page says 429
LOGIN_ADDRESS_FAILURE_LIMIT = env_rate("LOGIN_ADDRESS_FAILURE_LIMIT", "20/h")
#: reverse proxies in front of the web server that append to X-Forwarded-For; 0 trusts only the peer's address
NUM_PROXIES = env_int("NUM_PROXIES", 0)
NINJA_NUM_PROXIES = NUM_PROXIES

# django-axes: a user is locked out after LOGIN_FAILURE_LIMIT wrong passwords from one address
AXES_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = env_float("LOGIN_LOCKOUT_MINUTES", 15.0, minimum=0.1) / 60  # hours
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_HANDLER = "axes.handlers.cache.AxesCacheHandler" if REDIS_URL else "axes.handlers.database.AxesDatabaseHandler"
AXES_IPWARE_PROXY_COUNT = NUM_PROXIES or None
AXES_IPWARE_META_PRECEDENCE_ORDER = ["HTTP_X_FORWARDED_FOR", "REMOTE_ADDR"] if NUM_PROXIES else ["REMOTE_ADDR"]
AXES_VERBOSE = False
AXES_LOCKOUT_TEMPLATE = "registration/lockout.html"

# django-csp: the pages render untrusted content, so scripts come only from our static files
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        # bars set their width in a style attribute; an attribute cannot load anything or run script
        "style-src-attr": ["'unsafe-inline'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}
#: sent on every response (console.headers): no powerful browser feature is used by the console
PERMISSIONS_POLICY = (
    "accelerometer=(), camera=(), geolocation=(), gyroscope=(), magnetometer=(), microphone=(), "
    "payment=(), usb=(), interest-cohort=()"
)
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"

if not DEBUG:
    SESSION_COOKIE_SECURE = env_bool("SECURE_COOKIES", True)  # false only to test without TLS
    CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    if SESSION_COOKIE_SECURE:  # served over TLS: say so to browsers, and send plain HTTP there
        SECURE_SSL_REDIRECT = True
        SECURE_REDIRECT_EXEMPT = [r"^healthz$"]  # probes call it over plain HTTP inside the network
        SECURE_HSTS_SECONDS = env_int("HSTS_SECONDS", 31_536_000)
        SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("HSTS_INCLUDE_SUBDOMAINS", True)
        SECURE_HSTS_PRELOAD = env_bool("HSTS_PRELOAD", False)
        if not SECURE_HSTS_PRELOAD:
            # preloading is a commitment for the whole domain, the operator's to make (HSTS_PRELOAD=true)
            SILENCED_SYSTEM_CHECKS = ["security.W021"]
