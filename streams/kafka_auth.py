"""How every ragstream Kafka client authenticates: TLS and SASL from the settings.

The embedded broker speaks PLAINTEXT on loopback, the default.  A managed or secured
cluster needs TLS (``RAGSTREAM_KAFKA_SECURITY_PROTOCOL=SSL``), SASL
(``SASL_PLAINTEXT``) or both (``SASL_SSL``), with PLAIN or SCRAM-SHA-256/512
credentials and an optional private CA and client certificate (mutual TLS).

One mapping serves both kinds of client: :func:`faust_credentials` gives the Faust
app its ``broker_credentials``, and :func:`client_options` turns the same credentials
into aiokafka keyword arguments with Faust's own converter
(``faust.transport.drivers.aiokafka.credentials_to_aiokafka_auth``), so a stage's
consumers and producers and the CLI's and API's plain aiokafka clients can never
disagree about how they log in.  Every ``AIOKafkaProducer``, ``AIOKafkaConsumer`` and
``AIOKafkaAdminClient`` in the product passes ``**client_options()``.
"""
from __future__ import annotations

import ssl
from typing import Any, Optional

from streams.settings import Settings, get_settings


class KafkaLoginRefused(RuntimeError):
    """The broker refused the SASL login (wrong user or password, unknown user)."""


def refused_login(exc: BaseException, settings: Settings) -> Optional[KafkaLoginRefused]:
    """A clear error for aiokafka's failure on a refused SCRAM login, else None.

    aiokafka 0.12 parses the server's final SCRAM message as ``v=<signature>``; a
    refusal is ``e=<reason>`` (RFC 5802; Tansu answers ``e=unknown-user``), so the
    client raises ``KeyError('v')`` from its connection instead of an
    authentication error (tests/test_kafka_auth.py shows it).  Workaround, in this
    one place: :func:`topics.admin.ensure_topics`, which every process calls first,
    turns that into this error (not retried)."""
    if settings.kafka_security_protocol.startswith("SASL") and isinstance(exc, (KeyError, ValueError)):
        return KafkaLoginRefused(
            f"Kafka refused the {settings.kafka_sasl_mechanism} login of "
            f"{settings.kafka_sasl_username!r} ({type(exc).__name__}: {exc}): check "
            "RAGSTREAM_KAFKA_SASL_USERNAME, RAGSTREAM_KAFKA_SASL_PASSWORD and "
            "RAGSTREAM_KAFKA_SASL_MECHANISM")
    return None


def ssl_context(settings: Settings) -> Optional[ssl.SSLContext]:
    """The TLS context for ``SSL``/``SASL_SSL`` (None for the plaintext protocols).

    Verifies the broker's certificate and host name against ``kafka_ssl_cafile`` (a
    PEM bundle) or, when that is empty, the system's CAs; presents
    ``kafka_ssl_certfile``/``kafka_ssl_keyfile`` when set (mutual TLS).
    Raises ``OSError``/``ssl.SSLError`` when a named file is missing or not PEM.
    """
    if not settings.kafka_security_protocol.endswith("SSL"):
        return None
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH,
                                         cafile=settings.kafka_ssl_cafile or None)
    if settings.kafka_ssl_certfile:
        context.load_cert_chain(settings.kafka_ssl_certfile, settings.kafka_ssl_keyfile or None)
    return context


def faust_credentials(settings: Optional[Settings] = None):
    """Faust ``broker_credentials`` for ``settings`` (default ``get_settings()``):
    ``SASLCredentials`` for the SASL protocols, ``SSLCredentials`` for ``SSL``, None
    for ``PLAINTEXT``."""
    from faust.auth import SASLCredentials, SSLCredentials

    settings = settings or get_settings()
    protocol = settings.kafka_security_protocol
    if protocol == "PLAINTEXT":
        return None
    context = ssl_context(settings)
    if protocol == "SSL":
        return SSLCredentials(context)
    return SASLCredentials(username=settings.kafka_sasl_username,
                           password=settings.kafka_sasl_password.get_secret_value(),
                           ssl_context=context, mechanism=settings.kafka_sasl_mechanism)


def client_options(settings: Optional[Settings] = None) -> dict[str, Any]:
    """aiokafka keyword arguments (``security_protocol``, ``sasl_*``, ``ssl_context``)
    for a producer, consumer or admin client, from the same credentials the Faust
    app uses (module docstring).  ``{"security_protocol": "PLAINTEXT"}`` by default."""
    from faust.transport.drivers.aiokafka import credentials_to_aiokafka_auth

    return dict(credentials_to_aiokafka_auth(faust_credentials(settings)))
