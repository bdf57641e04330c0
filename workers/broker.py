"""The embedded broker: kombu's file-system transport, with each message written atomically.

kombu's own `_put` creates the message file under its final name and then writes it, and `_get`
takes any file with the queue's name without waiting for the writer's lock. Under load a worker
can take a message before its bytes are there, fail to decode it and stop consuming (seen in
bench/terminal.py on a busy machine: `JSONDecodeError` in the worker's event loop). Here a
message is written under a name no queue reads (`.tmp` after `.msg`) and renamed into place;
a rename within one folder is atomic, so a reader sees a whole message or none. An exchange's
table file is created the same way (kombu truncates it before locking it).

inspector/celery.py registers this transport as `filesystem`, so CELERY_BROKER_URL
`filesystem://` uses it in every process that loads the Celery app."""

from __future__ import annotations

import os
import uuid
from time import monotonic

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps


class Channel(filesystem.Channel):
    def _put(self, queue, payload, **kwargs):
        """Put `payload` onto `queue`: a temporary file, renamed once written."""
        name = f"{int(round(monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        partial = final + ".tmp"
        try:
            with open(partial, "wb") as f:
                f.write(str_to_bytes(dumps(payload)))
            os.rename(partial, final)
        except OSError as exc:
            try:
                os.unlink(partial)
            except OSError:
                pass
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc

    def _queue_bind(self, exchange, routing_key, pattern, queue):
        """Create the exchange's table file whole (a temporary file linked into place), so a
        reader never sees it empty; once it exists, kombu's locked read-modify-write applies."""
        file = self._exchange_file(exchange)
        self.control_folder.mkdir(exist_ok=True)
        if not file.exists():
            entry = [routing_key or "", pattern or "", queue or ""]
            partial = f"{file}.{uuid.uuid4().hex}.tmp"
            try:
                with open(partial, "wb") as f:
                    f.write(str_to_bytes(dumps([entry])))
                try:
                    os.link(partial, file)  # fails if another process created it meanwhile
                    return
                except FileExistsError:
                    pass
            except OSError as exc:
                raise ChannelError(f"Cannot open {file}") from exc
            finally:
                try:
                    os.unlink(partial)
                except OSError:
                    pass
        super()._queue_bind(exchange, routing_key, pattern, queue)


class Transport(filesystem.Transport):
    Channel = Channel
