"""The guest's network, by the operator's allowlist (docs/security.md, "Network").

Off by default. ``rules`` holds the ``[network.NAME]`` tables (destinations, the non-public
addresses they may reach, caps per run, the keys and profiles they apply to); ``fetcher`` makes
one run's requests on the host (``RunNetwork``: the destination matched, the name resolved and
its address checked by the host, caps counted, each request recorded); ``calls`` answers the
guest's requests as host calls (``NetworkCalls``). The guest side is ``guest/network.py``,
shipped with each run (``host_functions/program.py``): ``http.client``, ``urllib.request`` and
what uses them (``pandas.read_csv(url)``) reach the host through it; without a rule every
request raises the sentence ``describe_off`` writes. ``browser_runs`` gives browser-tier runs the
same: a grant per run (``BrowserRuns``) whose requests this server makes (``answer_request``).
"""

from .browser_runs import BrowserGrant, BrowserRuns
from .calls import NetworkCalls, answer_request, may_reach_network
from .fetcher import NetworkRecord, NetworkRefused, RunNetwork
from .rules import Destination, NetworkRule, describe_off, network_from, rules_for

__all__ = ["BrowserGrant", "BrowserRuns", "Destination", "NetworkCalls", "NetworkRecord", "NetworkRefused",
           "NetworkRule", "RunNetwork", "answer_request", "describe_off", "may_reach_network", "network_from",
           "rules_for"]
