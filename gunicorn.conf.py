"""gunicorn's settings for the console, read from the working directory (the Dockerfile's and docker-compose.yml's
``gunicorn console.wsgi:application`` run in the repository's root).

The access log is off unless turned on (``--access-logfile -``, or ``GUNICORN_CMD_ARGS=--access-logfile=-`` in
``.env``); on or off, no log line gunicorn writes holds a query string or an unmasked secret
(``console/gunicorn_logging.py``).
"""

logger_class = "console.gunicorn_logging.MaskingLogger"
# who, when, what (method, path without its query, protocol), the status, the size and the time it took
access_log_format = '%(h)s %(t)s "%(r)s" %(s)s %(b)s %(M)sms'
