"""The ``[network.NAME]`` tables: validated with sentences naming the table and key, read from
the TOML file, and the matching of destinations (scheme, host or *.suffix, port)."""

from __future__ import annotations

from pathlib import Path

import pytest

from wasm_runner.network import Destination, NetworkRule, describe_off, network_from, rules_for
from wasm_runner.settings import ConfigError, load_config


@pytest.mark.parametrize(("table", "message"), [
    ({}, "[network.r] needs destinations"),
    ({"destinations": ["api.example.org"]}, "a destination is scheme://host[:port]"),
    ({"destinations": ["ftp://api.example.org"]}, "must start with https:// (or http://)"),
    ({"destinations": ["https://api.example.org/v1"]}, "must be only scheme://host[:port]"),
    ({"destinations": ["https://user:pw@api.example.org"]}, "must be only scheme://host[:port]"),
    ({"destinations": ["https://*.10.0.0.1"]}, "*. goes before a name, not an address"),
    ({"destinations": ["https://a*b.example.org"]}, "needs a host name, *.suffix or an IP address"),
    ({"destinations": ["https://api.example.org:99999"]}, "has a port that is not a number"),
    ({"destinations": ["https://api.example.org"], "max_requests": 0}, "max_requests must be a whole number"),
    ({"destinations": ["https://api.example.org"], "request_seconds": "10"}, "request_seconds must be a number"),
    ({"destinations": ["https://api.example.org"], "addresses": ["10.0.0.300"]}, "[network.r] addresses:"),
    ({"destinations": ["https://api.example.org"], "allow": []}, "unknown [network.r] setting(s): ['allow']"),
])
def test_bad_tables_are_refused_with_a_sentence(table: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError) as caught:
        network_from({"r": table})
    assert message in str(caught.value)


def test_destinations_match_scheme_host_and_port() -> None:
    rule = NetworkRule.from_table("r", {"destinations": ["https://api.example.org", "https://*.wikipedia.org",
                                                         "http://127.0.0.1:8080"]})
    assert rule.destination("https", "api.example.org", 443) == Destination("https", "api.example.org", 443)
    assert rule.destination("http", "api.example.org", 80) is None  # https only unless written
    assert rule.destination("https", "api.example.org", 8443) is None
    assert rule.destination("https", "en.wikipedia.org", 443) is not None
    assert rule.destination("https", "wikipedia.org", 443) is None  # the suffix itself is not under it
    assert rule.destination("https", "evilwikipedia.org", 443) is None
    assert rule.destination("http", "127.0.0.1", 8080) is not None
    assert [str(n) for n in rule.allowed_addresses(rule.destinations[2])] == ["127.0.0.1/32"]
    assert rule.allowed_addresses(rule.destinations[0]) == ()


def test_rules_apply_by_key_and_profile() -> None:
    rules = network_from({
        "b": {"destinations": ["https://b.example.org"], "keys": ["course"], "profiles": ["analyst"]},
        "a": {"destinations": ["https://a.example.org"], "keys": ["*"]},
        "none": {"destinations": ["https://c.example.org"]},
    }).values()
    assert [r.name for r in rules_for(tuple(rules), "course", "analyst")] == ["a", "b"]
    assert [r.name for r in rules_for(tuple(rules), "course", "student")] == ["a"]
    assert describe_off("bob", "student") == ("network access is off for this run: no [network] rule of the "
                                              "server names the key 'bob' and profile 'student'")


def test_the_config_file_holds_the_rules(tmp_path: Path) -> None:
    path = tmp_path / "wasm-runner.toml"
    path.write_text('[network.course-apis]\ndestinations = ["https://api.example.org"]\nmax_requests = 5\n'
                    'keys = ["course"]\n')
    config = load_config(path, env={})
    rule = config.network["course-apis"]
    assert (rule.max_requests, rule.keys, rule.destinations[0].port) == (5, ("course",), 443)
    path.write_text('[network.course-apis]\ndestinations = ["api.example.org"]\n')
    with pytest.raises(ConfigError, match=r"\[network.course-apis\] a destination is scheme://host"):
        load_config(path, env={})
