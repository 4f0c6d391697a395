import { byId } from './dom.js';

const WIDTH = 600;
const HEIGHT = 160;
const PAD = 10;

/** A line-and-area chart of the last `capacity` values, drawn into the page's SVG. */
export class Sparkline {
  private readonly values: number[] = [];

  constructor(private readonly capacity = 60) {}

  push(value: number): void {
    this.values.push(value);
    if (this.values.length > this.capacity) this.values.shift();
    this.draw();
  }

  private draw(): void {
    const values = this.values;
    const min = Math.min(...values);
    const max = Math.max(...values);
    const span = max - min || 1;
    const step = WIDTH / Math.max(1, this.capacity - 1);
    const points = values.map((value, i) => {
      const x = (this.capacity - values.length + i) * step;
      const y = HEIGHT - PAD - ((value - min) / span) * (HEIGHT - 2 * PAD);
      return `${x.toFixed(1)},${y.toFixed(1)}`;
    });
    byId('chart-line').setAttribute('points', points.join(' '));
    const first = points[0]?.split(',')[0] ?? '0';
    const last = points.at(-1)?.split(',')[0] ?? '0';
    byId('chart-area').setAttribute(
      'd',
      points.length > 1 ? `M${first},${HEIGHT} L${points.join(' L')} L${last},${HEIGHT} Z` : '',
    );
  }
}
