"""The Python peer of the BabelQueue interop suite (interop/*_test.go).

Each run is one separate process that does one thing with the Python SDK (babelqueue, its
PulsarTransport and its runtime) against the broker the Go test gives it, and writes what it saw
and what it sent as JSON:

    python peer.py COMMAND SPEC.json RESULT.json

COMMAND is one of:

* ``versions``: the versions of Python, babelqueue and pulsar-client.
* ``publish``: publish the messages of the spec, each through the SDK (``BabelQueue.publish``,
  ``publish_with_headers``, ``EnvelopeCodec.make`` + ``PulsarTransport.publish``, or
  ``publish_routed``) or, for ``mode: client``, through the peer's own Pulsar client with the
  SDK's property projection plus extra properties (the SDK has no way to set them on Pulsar).
* ``consume``: run a ``BabelQueue`` worker (the SDK's runtime: routing, reconciliation, retries,
  dead letters) for up to ``max_messages`` messages, with one behaviour per URN.
* ``redrive``: run the SDK's ``babelqueue.redrive.redrive`` on a dead-letter queue.

Every message the SDK receives and every message it sends is recorded byte for byte (base64)
with its properties. The Go test compares them; this program checks nothing itself. Logs of the
SDK go to stderr and those of the Pulsar client to stdout, at WARNING and above.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import logging
import sys
import time
from importlib import metadata
from typing import Any, Callable, Dict, List

import pulsar
from babelqueue import BabelQueue, EnvelopeCodec
from babelqueue.pulsar_transport import PulsarTransport
from babelqueue.redrive import redrive


def b64(content: bytes) -> str:
    return base64.b64encode(content).decode("ascii")


class SendRecorder:
    """A Pulsar producer that records every send before making it."""

    def __init__(self, producer: Any, topic: str, sent: List[Dict[str, Any]]) -> None:
        self._producer = producer
        self._topic = topic
        self._sent = sent

    def send(self, content: bytes, properties: Any = None, **kwargs: Any) -> Any:
        self._sent.append(
            {"topic": self._topic, "payload_b64": b64(content), "properties": dict(properties or {})}
        )
        return self._producer.send(content, properties=properties, **kwargs)

    def close(self) -> None:
        self._producer.close()


class PeerTransport(PulsarTransport):
    """The SDK's PulsarTransport, unchanged, with its sends and receives recorded.

    A new subscription starts at the earliest message (the client's default is the latest,
    which would skip what the Go side published before the peer subscribed), unless
    ``sdk_position`` keeps the SDK's default."""

    def __init__(self, client: Any, prefix: str, subscription: str, sdk_position: bool = False) -> None:
        options = {} if sdk_position else {"initial_position": pulsar.InitialPosition.Earliest}
        super().__init__(client=client, topic_prefix=prefix, subscription=subscription, **options)
        self.sent: List[Dict[str, Any]] = []
        self.deliveries: List[Dict[str, Any]] = []
        self._recorders: Dict[str, SendRecorder] = {}

    def _producer(self, queue: str) -> Any:
        rec = self._recorders.get(queue)
        if rec is None:
            rec = SendRecorder(super()._producer(queue), self._topic(queue), self.sent)
            self._recorders[queue] = rec
        return rec

    def pop(self, queue: str, timeout: float = 1.0) -> Any:
        received = super().pop(queue, timeout)
        if received is not None:
            m = received.handle
            self.deliveries.append(
                {
                    "topic": m.topic_name(),
                    "payload_b64": b64(m.data()),
                    "properties": dict(m.properties()),
                    "redelivery_count": m.redelivery_count(),
                    "publish_time_ms": m.publish_timestamp(),
                    "received_at_ms": int(time.time() * 1000),
                    "route_urn": received.route_urn,
                    # surrogateescape: a body that is not UTF-8 reaches the runtime that way.
                    "body_b64": b64(received.body.encode("utf-8", "surrogateescape")),
                }
            )
        return received


def new_client(spec: Dict[str, Any]) -> Any:
    return pulsar.Client(
        spec["url"],
        operation_timeout_seconds=15,
        connection_timeout_ms=5000,
        # The client's own console logger: a Python logger is called back from the client's
        # threads, which can abort the process at interpreter shutdown.
        logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn),
    )


def dumps(value: Any) -> str:
    # allow_nan: record what the SDK holds even when it is not JSON (the Go side says so).
    return json.dumps(value, ensure_ascii=False, allow_nan=True)


def cmd_versions(_: Dict[str, Any]) -> Dict[str, Any]:
    return {
        "python": sys.version.split()[0],
        "babelqueue": metadata.version("babelqueue"),
        "pulsar_client": metadata.version("pulsar-client"),
    }


def cmd_publish(spec: Dict[str, Any]) -> Dict[str, Any]:
    client = new_client(spec)
    transport = PeerTransport(client, spec["prefix"], spec.get("subscription", "babelqueue"))
    app = BabelQueue(transport=transport)
    ids: List[str] = []
    own_producers: Dict[str, Any] = {}
    try:
        for m in spec["messages"]:
            mode, queue = m["mode"], m["queue"]
            if mode == "app":
                ids.append(app.publish(m["urn"], json.loads(m["data_json"]), queue=queue,
                                       trace_id=m.get("trace_id")))
            elif mode == "app-headers":
                ids.append(app.publish_with_headers(m["urn"], json.loads(m["data_json"]), m["headers"],
                                                    queue=queue, trace_id=m.get("trace_id")))
            elif mode in ("make", "text", "client"):
                if "text" in m:
                    body = m["text"]
                else:
                    meta = json.loads(m["meta_json"]) if "meta_json" in m else None
                    env = EnvelopeCodec.make(m["urn"], json.loads(m["data_json"]), queue=queue,
                                             trace_id=m.get("trace_id"), meta=meta)
                    if "attempts" in m:
                        env["attempts"] = m["attempts"]
                    if "schema_version" in m:
                        env["meta"]["schema_version"] = m["schema_version"]
                    body = EnvelopeCodec.encode(env)
                    ids.append(env["meta"]["id"])
                if mode == "client":
                    # The SDK's own projection, plus properties the SDK cannot set on Pulsar.
                    props = PulsarTransport._projection(body)
                    props.update(m.get("extra_properties", {}))
                    topic = spec["prefix"] + queue
                    producer = own_producers.get(topic)
                    if producer is None:
                        producer = SendRecorder(client.create_producer(topic), topic, transport.sent)
                        own_producers[topic] = producer
                    producer.send(body.encode("utf-8"), properties=props)
                elif "route_urn" in m:
                    transport.publish_routed(queue, body, m["route_urn"])
                else:
                    transport.publish(queue, body)
            else:
                raise ValueError("unknown publish mode " + repr(mode))
    finally:
        for producer in own_producers.values():
            producer.close()
        transport.close()
    return {"ids": ids, "sent": transport.sent}


class Boom(RuntimeError):
    """What a failing handler of the peer raises."""


def cmd_consume(spec: Dict[str, Any]) -> Dict[str, Any]:
    client = new_client(spec)
    transport = PeerTransport(client, spec["prefix"], spec.get("subscription", "babelqueue"),
                              sdk_position=spec.get("sdk_position", False))
    app = BabelQueue(transport=transport, queue=spec["queue"], **spec.get("app", {}))
    handled: List[Dict[str, Any]] = []
    calls: Dict[str, int] = {}

    def handler_for(urn: str, behaviour: str) -> Callable[..., None]:
        def handle(data: Any, meta: Any, envelope: Any) -> None:
            calls[urn] = calls.get(urn, 0) + 1
            fail = behaviour == "fail" or (behaviour in ("fail-first", "handover-fail") and calls[urn] == 1)
            handled.append(
                {
                    "urn": urn,
                    "delivery": len(transport.deliveries) - 1,
                    "envelope_json": dumps(envelope),
                    "data_json": dumps(data),
                    "meta_json": dumps(meta),
                    "raised": fail,
                }
            )
            if fail and behaviour == "handover-fail":
                # Subscribe the next worker at the latest position, so that it gets the retry
                # this failure is about to publish and not the message it failed.
                h = spec["handover"]
                client.subscribe(h["topic"], h["subscription"], consumer_type=pulsar.ConsumerType.Shared,
                                 initial_position=pulsar.InitialPosition.Latest).close()
            if fail:
                raise Boom("boom from python")

        return handle

    for urn, behaviour in spec.get("handlers", {}).items():
        app.register(urn, handler_for(urn, behaviour))
    try:
        processed = app.consume(max_messages=spec["max_messages"], timeout=spec.get("timeout", 10),
                                handle_signals=False)
    finally:
        transport.close()
    return {"processed": processed, "deliveries": transport.deliveries, "handled": handled,
            "sent": transport.sent}


def cmd_redrive(spec: Dict[str, Any]) -> Dict[str, Any]:
    client = new_client(spec)
    transport = PeerTransport(client, spec["prefix"], spec.get("subscription", "babelqueue"))
    try:
        result = redrive(transport, spec["dlq"], to_queue=spec.get("to_queue"),
                         dry_run=spec.get("dry_run", False), timeout=spec.get("timeout", 5))
    finally:
        transport.close()
    return {
        "redriven": result.redriven,
        "skipped": result.skipped,
        "items": [dataclasses.asdict(i) for i in result.items],
        "deliveries": transport.deliveries,
        "sent": transport.sent,
    }


COMMANDS = {"versions": cmd_versions, "publish": cmd_publish, "consume": cmd_consume, "redrive": cmd_redrive}


def main(argv: List[str]) -> int:
    if len(argv) != 4 or argv[1] not in COMMANDS:
        print("usage: peer.py {%s} SPEC.json RESULT.json" % "|".join(COMMANDS), file=sys.stderr)
        return 2
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING,
                        format="peer %(levelname)s %(name)s: %(message)s")
    with open(argv[2], encoding="utf-8") as f:
        spec = json.load(f)
    result = COMMANDS[argv[1]](spec)
    with open(argv[3], "w", encoding="utf-8") as f:
        json.dump(result, f, ensure_ascii=False)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
