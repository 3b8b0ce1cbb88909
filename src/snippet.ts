// Upstream text (an error page, a judge's answer) cut for a message a person reads. No imports:
// the rollout client (src/client.ts) uses it too and carries no server code.

/** `text` on one line, cut to `max` characters with an ellipsis. */
export function snippet (text: string, max = 200): string {
  const flat = text.replace(/\s+/g, ' ').trim()
  return flat.length > max ? `${flat.slice(0, max)}…` : flat
}
