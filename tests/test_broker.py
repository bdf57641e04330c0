"""The embedded broker never hands a worker half a message."""

from __future__ import annotations

import os
import threading

from kombu import Connection, Queue


def test_a_reader_racing_a_writer_only_ever_sees_whole_messages(tmp_path):
    folder = str(tmp_path)
    options = {
        "data_folder_in": folder,
        "data_folder_out": folder,
        "control_folder": str(tmp_path / "control"),
    }
    payload = {"body": "x" * 200_000}  # big enough that a write takes several system calls
    errors: list[BaseException] = []
    received = 0

    def read() -> None:
        nonlocal received
        with Connection("filesystem://", transport_options=options) as conn:
            queue = conn.SimpleQueue("race")
            try:
                while received < 200:
                    message = queue.get(timeout=10)
                    assert message.payload == payload
                    message.ack()
                    received += 1
            except BaseException as exc:  # noqa: BLE001 - reported by the test thread
                errors.append(exc)

    import inspector.celery  # noqa: F401 - registers the atomic transport as `filesystem`

    reader = threading.Thread(target=read)
    reader.start()
    with Connection("filesystem://", transport_options=options) as conn:
        producer = conn.Producer()
        for _ in range(200):
            producer.publish(payload, routing_key="race", declare=[Queue("race")])
    reader.join(timeout=60)
    assert errors == [] and received == 200
    assert not [n for n in os.listdir(folder) if n.endswith(".tmp")]


def broker_options(tmp_path) -> dict:
    return {
        "data_folder_in": str(tmp_path),
        "data_folder_out": str(tmp_path),
        "control_folder": str(tmp_path / "control"),
        "polling_interval": 0.01,
    }


def test_a_worker_asked_to_stop_stops_waiting_for_messages_at_once(tmp_path, monkeypatch):
    import time

    from celery.worker import state

    import inspector.celery  # noqa: F401 - registers the embedded broker's transport

    with Connection("filesystem://", transport_options=broker_options(tmp_path)) as conn:
        with conn.Consumer(Queue("idle"), callbacks=[lambda body, message: message.ack()]):
            # Celery's warm shutdown sets should_stop to the exit code, 0, a while into a wait.
            threading.Timer(0.3, lambda: monkeypatch.setattr(state, "should_stop", 0)).start()
            started = time.monotonic()
            try:
                conn.drain_events(timeout=5)
            except TimeoutError:
                pass
            waited = time.monotonic() - started

    assert 0.3 <= waited < 2.5, waited  # kombu's own transport would wait the whole 5 s


def test_a_worker_not_asked_to_stop_still_gets_a_message_that_comes_during_its_wait(tmp_path):
    import inspector.celery  # noqa: F401 - registers the embedded broker's transport

    received = []
    options = broker_options(tmp_path)
    with Connection("filesystem://", transport_options=options) as conn:
        callback = lambda body, message: (received.append(body), message.ack())  # noqa: E731
        with conn.Consumer(Queue("work"), callbacks=[callback]):

            def publish() -> None:
                with Connection("filesystem://", transport_options=options) as other:
                    other.Producer().publish(
                        {"run": 7}, routing_key="work", declare=[Queue("work")]
                    )

            threading.Timer(0.5, publish).start()  # later than a few of the transport's checks
            conn.drain_events(timeout=10)

    assert received == [{"run": 7}]
