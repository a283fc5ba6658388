"""The fleet view's web layer: one page (`/`) and one JSON answer (`GET /api/fleet`), served by scripts/fleet.py.

The page (templates/fleet.html, static/js/live/fleet.js) shows every replica's live lane side by side on one clock
and the router's counters; it asks `/api/fleet` once a second, which is `FleetScrape.snapshot()` (app/live/fleet.py)
as JSON. Nothing else: no engine, no sockets, no state. `serve()` runs it on a thread of the fleet script, on
Werkzeug's threaded server: a page for one operator, not a public endpoint (the replicas and the router are those).
"""
import logging
import threading

from flask import Flask, jsonify, render_template
from werkzeug.serving import BaseWSGIServer, make_server

from ..settings import ROOT
from ..web.routes import CSP
from .fleet import FleetScrape


def create_fleet_app(scrape: FleetScrape) -> Flask:
    app = Flask(__name__, template_folder=str(ROOT / "templates"), static_folder=str(ROOT / "static"))

    @app.get("/")
    def page():
        return render_template("fleet.html", replicas=scrape.replicas, router=scrape.router, policy=scrape.policy)

    @app.get("/api/fleet")
    def fleet():
        return jsonify(scrape.snapshot())

    @app.after_request
    def headers(response):
        response.headers["Content-Security-Policy"] = CSP
        response.headers["X-Content-Type-Options"] = "nosniff"
        return response

    return app


def serve(scrape: FleetScrape, host: str, port: int) -> BaseWSGIServer:
    """The fleet view on host:port, on a daemon thread; `.shutdown()` stops it. Its requests are not logged (the page
    asks once a second)."""
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    server = make_server(host, port, create_fleet_app(scrape), threaded=True)
    threading.Thread(target=server.serve_forever, name="fleet-view", daemon=True).start()
    return server
