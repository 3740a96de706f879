/** "52m", "3h", "2d": the largest whole unit of a duration. */
export function shortDuration(ms: number): string {
  const s = Math.round(Math.abs(ms) / 1000);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  if (s < 86400) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}

export const isoOrNull = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
