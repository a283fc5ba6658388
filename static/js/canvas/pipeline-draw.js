/**
 * Draws a pipeline-parallel lane's stage x time grid (core/pipeline.js `pipelineAt`): one row a stage, time across
 * from the step's start to its last micro-batch's end; each micro-batch's forward a bar (numbered, coloured by
 * micro-batch, a split step's decode call darker), and what is left of the row, the idle time, grey: the bubbles.
 * The row spans what the measured fraction is over: from the first micro-batch's start to the last one's end.
 * The measured fraction beside the formula is written above the rows. Reads the grids it is given; changes nothing;
 * returns what it drew (bars in CSS px) for the probe.
 */
import { FONT } from "./cells.js";
import { bubbleLine } from "../core/pipeline.js";

const BARS = [["#8ec5e8", "#2b7bb0"], ["#f7c98a", "#b36b00"], ["#9fdcc4", "#007a59"], ["#eab8d6", "#a0487f"]];
export const PIPE = Object.freeze({ idle: "#e3e6ea", text: "#1d2330", row: 18, gap: 4, title: 18, label: 64, pad: 8 });

/** The height of `count` lanes' grids of `stages` rows each. */
export function pipelineHeight(grids) {
  return grids.reduce((h, g) => h + PIPE.title + g.at.stages.length * (PIPE.row + PIPE.gap) + PIPE.pad, 0);
}

/** Paint `grids` ([{name, at}]) `width` CSS px wide; returns [{name, step, bars: [{stage, call, mb, x, y, w, h}],
 * idle: [{stage, x, y, w, h}], text}]. */
export function drawPipelines(ctx, grids, width) {
  ctx.clearRect(0, 0, width, pipelineHeight(grids));
  let y = 0;
  return grids.map(({ name, at }) => {
    const text = `${name} \u00b7 ${bubbleLine(at, at.stages.length)}`;
    ctx.fillStyle = PIPE.text;
    ctx.font = `bold 12px ${FONT}`;
    ctx.textBaseline = "middle";
    ctx.fillText(text, 0, y + PIPE.title / 2);
    y += PIPE.title;
    const x0 = PIPE.label, span = Math.max(1e-6, at.to - at.from), scale = (width - x0 - 4) / span;
    const bars = [], idle = [];
    at.stages.forEach((spans, stage) => {
      ctx.fillStyle = PIPE.text;
      ctx.font = `12px ${FONT}`;
      ctx.fillText(`stage ${stage}`, 0, y + PIPE.row / 2);
      ctx.fillStyle = PIPE.idle;  // the whole row idle first: the bars then cover the busy time
      ctx.fillRect(x0, y, span * scale, PIPE.row);
      idle.push({ stage, x: x0, y, w: span * scale, h: PIPE.row });
      for (const s of spans) {
        const bar = { stage, call: s.call, mb: s.mb, x: x0 + (s.start - at.from) * scale, y, w: Math.max(1, (s.end - s.start) * scale), h: PIPE.row };
        ctx.fillStyle = BARS[s.mb % BARS.length][s.call];
        ctx.fillRect(bar.x, bar.y, bar.w, bar.h);
        if (bar.w > 12) {
          ctx.fillStyle = s.call ? "#ffffff" : PIPE.text;
          ctx.font = `11px ${FONT}`;
          ctx.fillText(String(s.mb + 1), bar.x + 3, y + PIPE.row / 2);
        }
        bars.push(bar);
      }
      y += PIPE.row + PIPE.gap;
    });
    y += PIPE.pad;
    return { name, step: at.step, bars, idle, text };
  });
}
