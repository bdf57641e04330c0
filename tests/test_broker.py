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
