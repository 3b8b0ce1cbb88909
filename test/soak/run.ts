// npm run soak -- [--seconds 60] [--concurrency 32] [--seed 7] [--shutdown] [--report docs/RELIABILITY.md]
// Bounded in time, loopback only. Exits 1 when any invariant is violated.
import { writeFileSync } from 'node:fs'
import { parseArgs } from 'node:util'
import { runSoak, type SoakReport } from './soak.js'

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '60' },
    concurrency: { type: 'string', default: '32' },
    seed: { type: 'string', default: '20261129' },
    'kill-every-ms': { type: 'string', default: '1500' },
    shutdown: { type: 'boolean', default: false },
    report: { type: 'string' }
  }
})
const seconds = Math.min(Number(values.seconds), 3600)
const common = { durationS: seconds, concurrency: Number(values.concurrency), seed: Number(values.seed), killEveryMs: Number(values['kill-every-ms']), log: (line: string) => console.log(line) }

function summary (title: string, report: SoakReport): string {
  const lines = [
    `### ${title}`,
    '',
    `- requests sent: ${report.sent}, answered: ${report.answered}, in ${(report.durationMs / 1000).toFixed(1)} s (${(report.sent / (report.durationMs / 1000)).toFixed(0)} req/s) at ${report.options.concurrency} connections`,
    `- answers by status: ${Object.entries(report.byStatus).sort().map(([s, c]) => `${s}: ${c}`).join(', ')}`,
    `- connection errors: ${JSON.stringify(report.connectionErrors)}; client timeouts: ${report.timeouts}`,
    `- faults injected: ${report.faultsInjected.workerKills} plugin workers killed from outside, ${report.faultsInjected.networkFaultRequests} requests to faulty endpoints, ${report.faultsInjected.failingVerifierRequests} requests to failing verifiers`
  ]
  if (report.resources !== undefined) {
    const { start, end } = report.resources
    lines.push(`- server RSS: ${start.rssMiB} MiB at start, ${end.rssMiB} MiB at end; open fds ${start.fds} → ${end.fds}; worker processes ${start.workers} → ${end.workers}`)
  }
  if (report.serverCounts !== undefined) lines.push(`- server's own counters (arbiter_http_responses_total) agree with the client: ${report.violations.some((v) => v.startsWith('server counted')) ? 'NO' : 'yes'}`)
  if (report.cutOffAccepted !== undefined) lines.push(`- accepted requests cut off: ${report.cutOffAccepted}; exit code ${String(report.exitCode)}`)
  lines.push(`- verdict: ${report.violations.length === 0 ? 'PASS' : `FAIL (${report.violations.join('; ')})`}`, '')
  lines.push('| scenario | answers |', '|---|---|')
  for (const [name, tally] of Object.entries(report.byScenario)) lines.push(`| ${name} | ${Object.entries(tally).map(([a, c]) => `${a} × ${c}`).join(', ')} |`)
  lines.push('')
  return lines.join('\n')
}

const soak = await runSoak(common)
console.log(summary('Soak', soak))
const results = [summary(`Soak: ${seconds} s mixed load`, soak)]
let failed = soak.violations.length > 0
if (values.shutdown) {
  const drained = await runSoak({ ...common, durationS: Math.max(6, Math.round(seconds / 3)), shutdownAfterS: Math.max(3, Math.round(seconds / 6)) })
  console.log(summary('Shutdown under load', drained))
  results.push(summary('Shutdown under load: SIGTERM mid-soak', drained))
  failed ||= drained.violations.length > 0
}
if (values.report !== undefined) {
  const command = `npm run soak -- ${process.argv.slice(2).join(' ')}`
  writeFileSync(values.report, [
    '# Reliability',
    '',
    `Produced by \`${command}\` on ${new Date().toISOString().slice(0, 10)} (2 cores, loopback only).`,
    'The soak drives a mixed load across every verifier kind — healthy and failing plugins in Python and',
    'JavaScript, endpoints with network faults (latency, dripping bodies, resets mid-body, black holes,',
    'immediate closes, HTML, flapping), a rubric judge that answers, talks nonsense or fails — while plugin',
    'worker processes are killed from outside at random moments. It passes only when every request got',
    'exactly one answer, the server\'s counters agree with the client\'s, descriptors and worker processes',
    'return to their starting level and RSS stays within 160 MiB of it (V8 keeps the heap it grew); the',
    'shutdown run checks that SIGTERM mid-load cuts off no accepted request and that the process exits 0.',
    '',
    ...results
  ].join('\n'))
}
process.exit(failed ? 1 : 0)
