"""The hosts drill's parts alone (no stack): the network namespaces and relays of
drills/hosts_net.py really partition a host and really kill one, and the takeover
watch reads the workers' assignment lines right.  The drill itself runs in
tests/test_drill.py (``ragstream drill`` runs every drill, ``hosts`` among them)."""
from __future__ import annotations

import http.server
import os
import subprocess
import threading
import time

import pytest

from drills.hosts import AssignmentLog, parse_assignment
from drills.hosts_net import HostNet, HostNetError

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="ip netns needs root")


def _get(net: HostNet, host: str, port: int, max_s: float) -> str:
    """HTTP status code of GET 127.0.0.1:port from inside ``host`` ("000": none)."""
    out = subprocess.run([*net.hosts[host].exec_prefix(), "curl", "-s", "-m", str(max_s), "-o",
                          "/dev/null", "-w", "%{http_code}", f"http://127.0.0.1:{port}/"],
                         capture_output=True, text=True)
    return out.stdout


@pytest.fixture
def server():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv.server_address[1]
    srv.shutdown()


@needs_root
def test_hosts_reach_loopback_services_until_cut_and_after_restore(server, tmp_path):
    net = HostNet(["a", "b"], [server], tmp_path / "relays.log", ident=9000 + os.getpid() % 900)
    try:
        net.open()
        assert _get(net, "a", server, 5) == "200" and _get(net, "b", server, 5) == "200"
        net.cut("a")
        assert _get(net, "a", server, 2) == "000"  # packets dropped: no answer
        assert _get(net, "b", server, 5) == "200"  # the other host is untouched
        net.restore("a")
        deadline = time.monotonic() + 10
        while _get(net, "a", server, 2) != "200":
            assert time.monotonic() < deadline, "host a did not come back"
            time.sleep(0.2)
        killed = net.kill("b")
        assert killed >= 1 and net.hosts["b"].pids() == []
        assert _get(net, "b", server, 2) == "000"  # its relays died with it
    finally:
        net.close()
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-br", "link"], capture_output=True, text=True).stdout
    assert net.prefix not in names and net.prefix not in links  # nothing left behind


@needs_root
def test_the_services_host_relays_listen_on_the_bridge_only(server, tmp_path):
    net = HostNet(["a"], [server], tmp_path / "relays.log", ident=9000 + os.getpid() % 900)
    try:
        net.open()
        listening = subprocess.run(["ss", "-Hltn", f"sport = :{server}"], capture_output=True,
                                   text=True).stdout
        assert f"{net.gateway}:{server}" in listening
        assert f"0.0.0.0:{server}" not in listening and f"*:{server}" not in listening
    finally:
        net.close()


def test_open_refuses_without_socat(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # neither ip nor socat on it
    net = HostNet(["a"], [1], tmp_path / "relays.log")
    with pytest.raises(HostNetError, match="not found|root"):
        net.open()


def test_assignment_lines_are_parsed_and_tailed(tmp_path):
    assert parse_assignment("ragstream.uploads [0, 2]; ragstream.x [3]") == \
        {("ragstream.uploads", 0), ("ragstream.uploads", 2), ("ragstream.x", 3)}
    assert parse_assignment("no partitions (more consumers than partitions)") == frozenset()
    log = tmp_path / "w.log"
    log.write_text("[x] ragstream worker: normalize ready, assigned ragstream.uploads [0, 2]\n"
                   '{"message": "ragstream worker: chunk ready, assigned ragstream.elements [1]"}\n'
                   "ragstream worker: embed ready, assigned ragstream.enh")  # a line still written
    tail = AssignmentLog(log)
    tail.poll()
    assert tail.latest["normalize"][1] == {("ragstream.uploads", 0), ("ragstream.uploads", 2)}
    assert tail.latest["chunk"][1] == {("ragstream.elements", 1)}  # JSON log format too
    assert "embed" not in tail.latest
    with open(log, "a") as f:
        f.write("anced-chunks [0, 1]\nragstream worker: normalize ready, assigned ragstream.uploads [1]\n")
    tail.poll()
    assert tail.latest["embed"][1] == {("ragstream.enhanced-chunks", 0), ("ragstream.enhanced-chunks", 1)}
    assert tail.latest["normalize"][1] == {("ragstream.uploads", 1)}
    assert tail.held["normalize"] == {("ragstream.uploads", i) for i in (0, 1, 2)}
