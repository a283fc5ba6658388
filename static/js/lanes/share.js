/**
 * Sharing a run with a class: "link to this run" is the short `/runs/<id>` (the stored run carries its
 * mix, so no `#mix=` hash) and a click copies it (the clipboard where the browser allows it, else the
 * link is shown selected to copy by hand), with a confirmation; "QR code" opens a popover with the
 * server's QR image of that link (`/runs/<id>/qr.svg`, drawn by segno) large enough to scan from a
 * phone, the link written under it at the server's public address (publicurl.js), with a warning when that
 * address is loopback and a phone cannot reach it. Both appear only once the run has an id. A DOM widget: it
 * never touches the run state; main.js tells it which run is shown.
 */
import { el } from "../ui/dom.js";
import { publicLink, shareInfo, showWarning } from "./publicurl.js";

/** What a run's link gives, said where it is copied: unlike a page's #mix= address, which starts a live run for each
 * person who opens it, it replays this one run (issue 38: 30 students on a #mix= link made 30 queued runs). */
export const REPLAY_NOTE = "a replay of this run: everyone who opens it sees these same steps, nothing runs again";

/** The short link of a run, as a path. */
export function runPath(runId) {
  return `/runs/${encodeURIComponent(runId)}`;
}

export function createShare({ link, qrButton, status, popover, frame, url, close }) {
  let runId = null;
  let timer = null;

  const href = () => new URL(runPath(runId), location.href).href;
  function say(text, node = null) {
    status.replaceChildren(...(node ? [node] : []), text);
    clearTimeout(timer);
    if (!node) timer = setTimeout(() => status.replaceChildren(), 4000);
  }
  function selectByHand() {  // no clipboard here (an insecure origin, a refused permission): select the link to copy
    const box = el("input", { type: "text", readOnly: true, value: href(), className: "share-url", ariaLabel: "link to this run" });
    say(` press Ctrl+C (\u2318C) to copy \u2014 ${REPLAY_NOTE}`, box);
    box.focus();
    box.select();
  }
  function copy() {
    const text = href();
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(() => say(`copied \u2713 ${REPLAY_NOTE}`), selectByHand);
    } else selectByHand();
  }
  function open() {
    const src = `${runPath(runId)}/qr.svg`;
    const img = frame.querySelector("img") || frame.appendChild(el("img", { id: "qr-img", width: 320, height: 320,
      alt: "QR code of the link to this run" }));
    if (img.getAttribute("src") !== src) img.src = src;
    url.textContent = href();
    const warning = popover.querySelector("#qr-warning") || url.after(el("p", { id: "qr-warning", className: "qr-warning",
      hidden: true })) || popover.querySelector("#qr-warning");
    const shown = runId;
    shareInfo().then((info) => {
      if (shown !== runId) return;
      url.textContent = publicLink(info, runPath(shown));  // what the QR code carries
      showWarning(warning, info);
    });
    popover.hidden = false;
    close.focus();
  }
  function shut() {
    if (popover.hidden) return;
    popover.hidden = true;
    qrButton.focus();
  }

  link.addEventListener("click", (e) => {
    if (!runId || e.button !== 0 || e.ctrlKey || e.metaKey || e.shiftKey || e.altKey) return;  // new tab: the plain link
    e.preventDefault();
    copy();
  });
  qrButton.addEventListener("click", () => (popover.hidden ? open() : shut()));
  close.addEventListener("click", shut);
  popover.addEventListener("keydown", (e) => {
    if (e.key !== "Escape") return;
    e.stopPropagation();  // Escape closes the QR code only (not presenter mode)
    shut();
  });

  return {
    /** Show the run `id` (null: no run with an id yet): the link, the QR button, and a popover already open follows. */
    update(id) {
      const next = id || null;
      if (next === runId) return;
      runId = next;
      link.hidden = !runId;
      qrButton.hidden = !runId;
      status.replaceChildren();
      if (runId) link.href = runPath(runId);
      else link.removeAttribute("href");
      if (!runId) shut();
      else if (!popover.hidden) open();
    },
    /** Whether the QR popover is open (Escape closes it before anything else). */
    get open() { return !popover.hidden; },
    close: shut,
  };
}
