"""HTTP of classes and sharing: a class's student page, its QR code, and the base URL shared links carry.

    GET /c/<code>           the page as a student of class <code> (404 page if no such class is open)
    GET /c/<code>/qr.svg    a QR code of the class's link        GET /api/share   {base, loopback, warning}

QR codes carry app.web.public_url's address, never a client-chosen Host. This module reads the classes and
the settings; it never changes a class.
"""
import io

import segno
from flask import Blueprint, Response, current_app, jsonify, render_template, request

from .public_url import public_base, share_info

bp = Blueprint("classes", __name__)


def qr_response(path: str) -> Response:
    """A QR code (SVG, drawn by segno) of this server's public address + `path`; not cached, since the address
    follows the server's settings."""
    out = io.BytesIO()
    segno.make(public_base(current_app.config, request) + path.lstrip("/"), error="m").save(
        out, kind="svg", scale=8, border=2, xmldecl=False, dark="#1d2330")
    return Response(out.getvalue(), mimetype="image/svg+xml", headers={"Cache-Control": "no-cache"})


def _open(code: str) -> bool:
    return current_app.extensions["classes"].is_open(code)


@bp.get("/c/<code>")
def class_page(code: str):
    """The student view of a class: the page, told to join `code` (it watches the teacher's runs)."""
    if len(code) > 16 or not _open(code):
        return render_template("index.html", run_id=None, missing_class=code[:16]), 404
    return render_template("index.html", run_id=None, class_code=code.upper())


@bp.get("/c/<code>/qr.svg")
def class_qr(code: str):
    if len(code) > 16 or not _open(code):
        return jsonify({"error": "no open class with this code"}), 404
    return qr_response(f"/c/{code.upper()}")


@bp.get("/api/share")
def share():
    return jsonify(share_info(current_app.config, request))
