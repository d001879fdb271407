"""Where the console may send requests of its own (webhooks): public addresses only, unless allowed by name.

A webhook URL is an admin's input that the console then connects to, from inside its own network. Without a
policy it is a probe of that network: the database on ``127.0.0.1:5432``, a cloud's metadata service on
``169.254.169.254`` (credentials), anything on ``10.x``. So by default a URL is refused when its host is, or
resolves to, an address that is not public: loopback, private (RFC 1918, ``fc00::/7``), link-local (cloud
metadata), multicast, reserved, unspecified, shared (``100.64/10``), documentation ranges... everything
``ipaddress`` does not call global, in every spelling an address can take: decimal (``2130706433``), hex
(``0x7f000001``), octal (``0177.0.0.1``), short (``127.1``), IPv6 (``[::1]``), IPv4-mapped
(``[::ffff:127.0.0.1]``) and the other IPv6 forms that embed an IPv4 address. Well-known metadata host names
(:data:`METADATA_HOSTS`) are refused without resolving them.

The check runs when a URL is saved (a host that does not resolve yet is accepted then) and again at each send,
where the name is resolved once and the connection goes to the address that was checked: a DNS answer that
changes between the check and the connection (DNS rebinding) cannot move the request. Redirects are never
followed (a 3xx is an answer like any other), and no proxy from the environment is used.

``WEBHOOK_ALLOWED_HOSTS`` (settings, environment) lets an admin allow a private receiver by the host name written
in its URL: ``hooks.internal`` exactly, or ``.internal`` for it and every name under it. Names are compared as
written, so allowing ``127.0.0.1`` does not allow ``2130706433``.
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import ssl
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

#: names of cloud metadata services, refused whatever they resolve to (data, not rules)
METADATA_HOSTS = frozenset(
    {
        "metadata.google.internal",
        "metadata.goog",
        "metadata",
        "instance-data",
        "instance-data.ec2.internal",
        "metadata.azure.com",
        "metadata.tencentyun.com",
        "100-100-100-200.alibaba",
    }
)

#: characters of a receiver's answer kept (masked) with a failed attempt
SNIPPET_CHARS = 120

#: NAT64's well-known prefix: the last 32 bits are an IPv4 address
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


class Refused(ValueError):
    """A destination the policy refuses; the message says why and what an admin can do. Sending again will not
    help: the URL or the allowed hosts must change."""


class Unresolved(OSError):
    """A name that does not resolve at send time (perhaps for a while: worth another try)."""


@dataclass(frozen=True)
class Destination:
    scheme: str
    host: str
    port: int
    #: path and query, as sent
    target: str
    #: the addresses checked, connected to in this order (empty: checked without resolving)
    addresses: tuple[IPAddress, ...]


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one stands for: mapped, compatible, NAT64, 6to4 or Teredo."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    packed = address.packed
    if address in _NAT64 or (packed[:12] == bytes(12) and int(address) > 0xFFFF):  # ::a.b.c.d (deprecated)
        return ipaddress.IPv4Address(packed[12:])
    return None


#: the address classes refused, in the order they are named (the first that applies)
_CLASSES = (
    ("is_unspecified", _("an unspecified address")),
    ("is_loopback", _("a loopback address")),
    ("is_link_local", _("a link-local address (cloud metadata lives there)")),
    ("is_multicast", _("a multicast address")),
    ("is_reserved", _("a reserved address")),
    ("is_private", _("a private address")),
)
NOT_PUBLIC = _("not a public address")


def address_problem(address: IPAddress) -> str | None:
    """Why the console must not connect to ``address`` ("a loopback address"...), or None for a public one."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(address)
        if embedded is not None:
            problem = address_problem(embedded)
            if problem:
                return problem
    for attribute, label in _CLASSES:
        if getattr(address, attribute):
            return str(label)
    if not address.is_global:
        return str(NOT_PUBLIC)
    return None


def literal_address(host: str) -> IPAddress | None:
    """``host`` as an IP address when it is one in any spelling the resolver accepts, else None."""
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        pass
    # decimal, hex, octal and short IPv4 forms (2130706433, 0x7f000001, 0177.0.0.1, 127.1): what inet_aton reads
    if host and all(c in "0123456789abcdefxABCDEFX." for c in host) and any(c.isdigit() for c in host):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return None
    return None


def allowed_by_name(host: str) -> bool:
    """Whether an admin allowed ``host`` (as written in the URL) in ``WEBHOOK_ALLOWED_HOSTS``."""
    host = host.lower().rstrip(".")
    for entry in getattr(settings, "WEBHOOK_ALLOWED_HOSTS", ()):
        entry = entry.strip().lower().rstrip(".")
        if not entry:
            continue
        if host == entry.strip("[]") or (entry.startswith(".") and (host == entry[1:] or host.endswith(entry))):
            return True
    return False


def _refused(host: str, problem: str, resolved: IPAddress | None = None) -> Refused:
    """The refusal, in the request's language (a page, the API) or English (a worker)."""
    if resolved is None:
        text = gettext(
            "refused: %(host)s is %(problem)s; webhooks go to public addresses only (an admin may allow a private "
            "receiver by name in WEBHOOK_ALLOWED_HOSTS)"
        )
    else:
        text = gettext(
            "refused: %(host)s resolved to %(address)s, %(problem)s; webhooks go to public addresses only (an admin "
            "may allow a private receiver by name in WEBHOOK_ALLOWED_HOSTS)"
        )
    return Refused(text % {"host": host, "problem": problem, "address": resolved})


def resolve(host: str, port: int) -> tuple[IPAddress, ...]:
    """Every address ``host`` resolves to (OSError when it does not)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    found: dict[IPAddress, None] = {}
    for _family, _type, _proto, _name, sockaddr in infos:
        found[ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])] = None
    return tuple(found)


def check(url: str, *, must_resolve: bool) -> Destination:
    """The destination of ``url`` if the policy allows it (:class:`Refused` if not).

    ``must_resolve``: at send time, a name that does not resolve is refused; at save time it is accepted (the
    receiver may not exist yet) and checked again when something is sent.
    """
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        raise Refused(gettext("the URL must start with http:// or https:// and name a host"))
    try:
        port = parts.port or (443 if scheme == "https" else 80)
    except ValueError:
        raise Refused(gettext("the URL's port is not a number from 1 to 65535")) from None
    host = parts.hostname.rstrip(".")
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    allowed = allowed_by_name(host)
    literal = literal_address(host)
    if literal is not None:
        problem = None if allowed else address_problem(literal)
        if problem:
            raise _refused(host, problem)
        return Destination(scheme, host, port, target, (literal,))
    if host.lower() in METADATA_HOSTS and not allowed:
        raise _refused(host, gettext("a cloud metadata service"))
    try:
        addresses = resolve(host, port)
    except (OSError, UnicodeError) as exc:
        if must_resolve:
            raise Unresolved(f"could not resolve {host}: {exc}") from None
        return Destination(scheme, host, port, target, ())
    if not allowed:
        for address in addresses:  # every answer: a name with one public and one private address is refused
            problem = address_problem(address)
            if problem:
                raise _refused(host, problem, address)
    return Destination(scheme, host, port, target, addresses)


def _connection(destination: Destination, address: IPAddress, timeout: float) -> http.client.HTTPConnection:
    """A connection to ``address`` that still names ``destination.host`` (Host header, TLS SNI and certificate)."""
    connection: http.client.HTTPConnection
    if destination.scheme == "https":
        connection = http.client.HTTPSConnection(
            destination.host, destination.port, timeout=timeout, context=ssl.create_default_context()
        )
    else:
        connection = http.client.HTTPConnection(destination.host, destination.port, timeout=timeout)

    def connect_to_checked(_address: Any, timeout: Any = None, source_address: Any = None) -> socket.socket:
        return socket.create_connection((str(address), destination.port), timeout, source_address)

    connection._create_connection = connect_to_checked  # type: ignore[attr-defined]
    return connection


def snippet(raw: bytes) -> str:
    """The start of a receiver's answer, on one line (the caller masks it)."""
    text = " ".join(raw.decode("utf-8", "replace").split())
    return text if len(text) <= SNIPPET_CHARS else text[: SNIPPET_CHARS - 1] + "…"


def post(url: str, body: bytes, headers: dict[str, str], timeout: float) -> tuple[int | None, str, dict[str, str]]:
    """POST ``body`` to ``url`` under the policy: (status code or None, error text or "", response headers);
    :class:`Refused` when the policy refuses the destination.

    Only the status, a short snippet of a non-2xx answer and the headers come back; a 2xx answer's body is read
    (at most 64 KiB) and dropped."""
    try:
        destination = check(url, must_resolve=True)
    except Unresolved as exc:
        return None, str(exc), {}
    last_error = ""
    for address in destination.addresses:
        connection = _connection(destination, address, timeout)
        try:
            try:
                connection.connect()
            except TimeoutError:
                last_error = f"no connection within {timeout:g} s"
                continue  # nothing was sent: the next address of the name, if any
            except ssl.SSLError as exc:
                return None, f"TLS failed: {exc.reason or exc}", {}
            except OSError as exc:
                last_error = f"could not connect: {exc.strerror or exc}"
                continue
            connection.request("POST", destination.target, body=body, headers=headers)
            response = connection.getresponse()
            answer = response.read(65536 if 200 <= response.status < 300 else SNIPPET_CHARS * 4)
            status, answer_headers = response.status, dict(response.getheaders())
        except TimeoutError:
            return None, f"no answer within {timeout:g} s", {}
        except http.client.HTTPException as exc:
            return None, f"not an HTTP answer: {type(exc).__name__}", {}
        except OSError as exc:  # sent, or partly: never again to another address (one delivery, one request)
            return None, f"connection lost: {exc.strerror or exc}", {}
        finally:
            connection.close()
        if 200 <= status < 300:
            return status, "", answer_headers
        shown = snippet(answer)
        return status, f"HTTP {status}" + (f": {shown}" if shown else ""), answer_headers
    return None, last_error or f"could not resolve {destination.host}", {}
