"""URLs that name several Redis hosts (`redis+cluster://`, `redis+sentinel://`): the parts both share, read once.

    scheme://[[user]:password@]host:port[,host:port...][/path][?name=value...]

User and password are percent-decoded; an IPv6 host is written in brackets ([::1]:7000). Each caller says what its
hosts are called, which query parameters it knows, and reads the path itself."""

from dataclasses import dataclass
from urllib.parse import parse_qs, unquote


@dataclass(frozen=True, slots=True)
class HostsUrl:
    scheme: str  # lower case
    hosts: tuple[tuple[str, int], ...]
    username: str | None
    password: str | None
    path: str  # as written, without the leading '/'
    params: dict[str, str]  # the query's parameters (the last value of each)


def parse(url: str, schemes: tuple[str, ...], form: str, host_word: str, known: tuple[str, ...]) -> HostsUrl:
    """The parts of `url`; ValueError says what is wrong. `form`: the URL's form, for the error; `host_word`: what
    one host is ("node", "Sentinel"); `known`: the query parameters allowed."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in schemes:
        raise ValueError(f"not a {form} URL: {url!r}")
    rest, _, query = rest.partition("?")
    netloc, _, path = rest.partition("/")
    userinfo, at, hosts = netloc.rpartition("@")
    if not at:
        hosts = netloc
    username = password = None
    if userinfo:
        user, colon, secret = userinfo.partition(":")
        username, password = (unquote(user) or None), (unquote(secret) if colon else None)
    found: list[tuple[str, int]] = []
    for item in hosts.split(","):
        host, colon, port = item.strip().rpartition(":")
        if not colon or not host or not port.isdigit():
            raise ValueError(f"{url!r}: each {host_word} is host:port, not {item.strip()!r}")
        found.append((host.strip("[]"), int(port)))
    params = {key: values[-1] for key, values in parse_qs(query).items()}
    unknown = set(params) - set(known)
    if unknown:
        raise ValueError(f"{url!r}: unknown parameters {sorted(unknown)}; known: {', '.join(known)}")
    return HostsUrl(scheme.lower(), tuple(found), username, password, path, params)
