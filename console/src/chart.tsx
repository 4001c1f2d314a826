/** @jsxImportSource preact */
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

/**
 * A time series chart (uPlot: canvas, made for dashboards, 20 KB gzipped). The canvas is
 * hidden from screen readers: every chart sits beside a table of the same figures.
 */
export interface Series {
  label: string;
  values: (number | null)[];
  color: string;
  /** Bars rather than a line. */
  bars?: boolean;
  /** Drawn against the right-hand scale (rates, 0 to 1). */
  rate?: boolean;
}

const bars = uPlot.paths.bars?.({ size: [0.6, 48] });

export function TimeChart(props: { title: string; times: number[]; series: Series[]; height?: number }) {
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const el = box.current;
    if (el === null || props.times.length === 0) return;
    const hasRate = props.series.some((s) => s.rate);
    // Half a period of room on each side, so the first and last bars are drawn whole.
    const times = props.times.map((t) => t / 1000);
    const half = times.length > 1 ? ((times[1] as number) - (times[0] as number)) / 2 : 43_200;
    const xRange: uPlot.Range.MinMax = [(times[0] as number) - half, (times.at(-1) as number) + half];
    const opts: uPlot.Options = {
      width: Math.max(el.clientWidth, 280),
      height: props.height ?? 220,
      cursor: { drag: { x: false, y: false } },
      scales: {
        x: { time: true, range: () => xRange },
        ...(hasRate ? { rate: { range: [0, 1] as [number, number] } } : {}),
      },
      axes: [
        { stroke: '#475467', grid: { stroke: '#eaecf0' } },
        { stroke: '#475467', grid: { stroke: '#eaecf0' } },
        ...(hasRate
          ? [
              {
                scale: 'rate',
                side: 1 as const,
                stroke: '#475467',
                grid: { show: false },
                values: (_u: uPlot, v: number[]) => v.map((x) => `${Math.round(x * 100)}%`),
              },
            ]
          : []),
      ],
      series: [
        {},
        ...props.series.map((s) => ({
          label: s.label,
          stroke: s.color,
          width: 2,
          ...(s.rate ? { scale: 'rate' } : {}),
          ...(s.bars ? { fill: `${s.color}55`, ...(bars ? { paths: bars } : {}), points: { show: false } } : {}),
        })),
      ],
    };
    const chart = new uPlot(opts, [times, ...props.series.map((s) => s.values)] as uPlot.AlignedData, el);
    const resize = new ResizeObserver(() =>
      chart.setSize({ width: Math.max(el.clientWidth, 280), height: opts.height }),
    );
    resize.observe(el);
    return () => {
      resize.disconnect();
      chart.destroy();
    };
  }, [props.times, props.series, props.height]);
  return <div class="chart" ref={box} aria-hidden="true" data-chart={props.title} />;
}
