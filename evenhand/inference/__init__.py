"""The inference floor: estimates and the rules that read them.

- ``stats``: the jackknife-t over scenarios, the cluster bootstrap and the paired comparison.
- ``decision``: every flag, verdict, removal class, Holm family, rank and beats-control mark, written once.
"""
