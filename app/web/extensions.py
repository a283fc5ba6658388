"""The one `socketio` object the web wing shares: the factory calls `socketio.init_app(app)`, the socket
handlers (app.web.events) register on it, the command line serves it. Kept alone in a module that imports none
of the others, so that nothing here imports in a circle. This module knows Flask-SocketIO, nothing else.
"""
from flask_socketio import SocketIO

socketio = SocketIO()
