"""gunicorn's logs without unmasked request data (``gunicorn.conf.py`` selects this logger).

gunicorn writes its access log (when ``--access-logfile`` turns it on) and its error log with handlers of its own,
outside Django's ``LOGGING``, so the masking filter of every other log line is not on them. Here:

- every handler of both logs gets ``console.log_masking.MaskSecretsFilter`` (the formatted line is masked);
- the request data a format may print is reduced before formatting, whatever ``--access-logformat`` says: the
  request line (``%(r)s``) and the referer (``%(f)s``) lose their query strings, the query (``%(q)s``) is
  omitted, and the credential headers and the WSGI environ's query and raw URI are replaced by ``-``.
"""

from __future__ import annotations

from typing import Any

from gunicorn.glogging import Logger

from .log_masking import MaskSecretsFilter

#: header atoms (``%({name}i)s``) that carry credentials
SECRET_HEADERS = ("{authorization}i", "{proxy-authorization}i", "{cookie}i", "{x-api-key}i")
#: WSGI environ atoms (``%({name}e)s``) that carry the query or credentials
SECRET_ENVIRON = ("{query_string}e", "{raw_uri}e", "{request_uri}e", "{http_authorization}e", "{http_cookie}e")
OMITTED = "-"


def without_query(url: str) -> str:
    return url.split("?", 1)[0]


class MaskingLogger(Logger):
    def setup(self, cfg: Any) -> None:
        super().setup(cfg)
        for log in (self.error_log, self.access_log):
            for handler in log.handlers:
                if not any(isinstance(f, MaskSecretsFilter) for f in handler.filters):
                    handler.addFilter(MaskSecretsFilter())

    def atoms(self, resp: Any, req: Any, environ: dict[str, Any], request_time: Any) -> dict[str, Any]:
        atoms: dict[str, Any] = super().atoms(resp, req, environ, request_time)
        atoms["r"] = f"{environ.get('REQUEST_METHOD')} {environ.get('PATH_INFO')} {environ.get('SERVER_PROTOCOL')}"
        atoms["q"] = OMITTED
        atoms["f"] = without_query(str(atoms.get("f") or OMITTED))
        for name in (*SECRET_HEADERS, *SECRET_ENVIRON):
            if name in atoms:
                atoms[name] = OMITTED
        return atoms
