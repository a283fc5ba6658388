"""Socket.IO frames as the server reads them: every frame that is not a well-formed client packet becomes the
`_unreadable` event (answered with a `run_error`, app.web.events) instead of a traceback in python-socketio.

A client may send `0` connect, `1` disconnect and `2` event (a list whose first item is the event's name) on
the one namespace, `/`. Everything else — an empty packet (`4`), `42` with no arguments, `42{}`, `42[]`, `42[1]`,
an unknown or server-only type (`49`, `44`), an ack (`43`: the server never asks for one), binary packets (the
page never sends one), an ack id of 100 digits or more, an event to another namespace — is ignored with one line
in the log, counted (`CheckedPacket.ignored`); so is an event no handler knows (`on_unknown_event`). Payloads that are not JSON or nest too
deep are app.protocol.WireJSON's. This module knows python-socketio's packet format, nothing of runs.
"""
import logging

from flask_socketio import emit
from socketio import packet

from ..protocol import NAMESPACE, UNREADABLE, Event, WirePacket, error_payload
from .extensions import socketio

log = logging.getLogger("batch_lanes.frames")
CLIENT_TYPES = (packet.CONNECT, packet.DISCONNECT, packet.EVENT)


class CheckedPacket(WirePacket):
    ignored = 0   # frames ignored since the process started (each also logged, at one line)

    def __init__(self, packet_type=packet.EVENT, data=None, namespace=None, id=None, binary=None, encoded_packet=None):
        super().__init__(packet_type, data, namespace, id, binary, encoded_packet)
        if encoded_packet is not None and len(encoded_packet) == 0:
            self._ignore(encoded_packet, "an empty packet")

    def decode(self, encoded_packet):
        try:
            count = super().decode(encoded_packet)
        except ValueError as e:    # a type that is not a digit, an ack id of 100+ digits, too many attachments
            return self._ignore(encoded_packet, str(e))
        if isinstance(self.data, list) and self.data[:1] == [UNREADABLE]:   # WireJSON could not decode the payload
            return self._ignore(encoded_packet, f"a payload that is not JSON, nests too deep or holds a number longer "
                                                f"than 100 digits ({self.data[1]})")
        if self.packet_type not in CLIENT_TYPES:
            return self._ignore(encoded_packet, f"packet type {self.packet_type!r} is not one a client sends")
        if self.packet_type == packet.EVENT and not (isinstance(self.data, list) and self.data
                                                     and isinstance(self.data[0], str) and self.data[0]):
            return self._ignore(encoded_packet, "an event packet without an event name")
        if self.packet_type == packet.EVENT and self.namespace not in (None, NAMESPACE):
            return self._ignore(encoded_packet, "an event to a namespace this server does not serve")
        return count

    def _ignore(self, encoded_packet, why: str) -> int:
        """Turn this packet into the `_unreadable` event (no ack id, no attachments) and say so at one line."""
        CheckedPacket.ignored += 1
        log.warning("socket frame ignored (%d so far): %s: %.60r", CheckedPacket.ignored, why, encoded_packet)
        self.packet_type, self.data, self.id = packet.EVENT, [UNREADABLE, why], None
        self.namespace = None     # answered where the client is connected
        return 0


@socketio.on("*")
def on_unknown_event(event, *args):
    """An event no handler knows: counted and logged like an ignored frame, and answered."""
    CheckedPacket.ignored += 1
    log.warning("socket event ignored (%d so far): no event %.60r", CheckedPacket.ignored, event)
    emit(Event.RUN_ERROR, error_payload(f"there is no event {event!r}", "event", code="invalid"))
