/**
 * The sweep's progress bar on stderr: points done, elapsed, ETA. Drawn only on a terminal;
 * anywhere else (a pipe, a batch job's log) it writes nothing.
 */
import { performance } from 'node:perf_hooks';

function clock(s: number): string {
  if (!Number.isFinite(s)) return '--';
  const t = Math.round(s);
  const h = Math.floor(t / 3600);
  const m = Math.floor((t % 3600) / 60);
  const sec = t % 60;
  return h ? `${h}h${String(m).padStart(2, '0')}m` : m ? `${m}m${String(sec).padStart(2, '0')}s` : `${sec}s`;
}

export class Progress {
  private done = 0;
  private readonly t0 = performance.now();
  private readonly out: NodeJS.WriteStream | null;

  constructor(private readonly total: number, private readonly label: string, stream: NodeJS.WriteStream = process.stderr) {
    this.out = stream.isTTY ? stream : null;
    this.draw();
  }

  /** One more point done. */
  tick(): void {
    this.done++;
    this.draw();
  }

  /** The line the bar shows now (also what a test reads). */
  line(): string {
    const width = 30;
    const filled = this.total ? Math.round((this.done / this.total) * width) : width;
    const elapsed = (performance.now() - this.t0) / 1000;
    const eta = this.done ? (elapsed / this.done) * (this.total - this.done) : NaN;
    return `${this.label} [${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${this.done}/${this.total} points, ${clock(elapsed)} elapsed, ETA ${this.done === this.total ? '0s' : clock(eta)}`;
  }

  private draw(): void {
    if (!this.out) return;
    this.out.write(`\r${this.line()}\x1b[K`);
  }

  /** Ends the bar's line. */
  finish(): void {
    if (this.out) this.out.write('\n');
  }
}
