"""Fault drills (``ragstream drill``): repeatable faults against the real embedded
stack, each followed by a check of the delivery promises.

Owns:
    drill.py    the drills (seeded corpus, fault, wait, verdict) and ``drill_main``
    corpus.py   the seeded mixed corpus the drills ingest
    faults.py   the faults: worker fleets (all-in-one or one per stage), SIGKILL /
                SIGTERM, stopping and restarting a devstack service
    checks.py   the verdict from what was observed (pure functions, tested alone)
    hosts.py    the ``hosts`` drill: workers on two hosts, one cut off, one killed
    hosts_net.py  those hosts: network namespaces, a bridge, socat relays (root)

May import: ``devstack`` (services, worker processes), ``streams`` (settings, the
producer side ``streams.ingest``, kafka_io), ``adapters``, ``schemas``, ``topics``,
``stages`` (samples).  Never ``cli`` or ``api``.  Nothing but ``cli.drill`` imports
``drills``.
"""
