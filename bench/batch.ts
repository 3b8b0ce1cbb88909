// Issue 5's benchmark: one 64-item POST /v1/verify/batch against the same 64 verifications sent
// as single requests, in one run, for plugin work (the seed's Python verifier) and endpoint work.
// Singles are measured one at a time (a worker scoring its group in a loop) and 64 at a time
// (a worker that already fans out); the batch is one call at a time.
// Goal: batch items/s at least 3 times single requests/s.
import { SERVER_JS, UPSTREAM_JS, goal, load, start } from './harness.js'

const GROUP = 64
const upstream = await start(UPSTREAM_JS)
const arbiter = await start(SERVER_JS, { LOG_LEVEL: 'info' })
const task = { prompt: 'What is 2+2?', reference: '4' }
const works = {
  plugin: { name: 'arithmetic', version: '1.0.0', verifier: { kind: 'plugin', ref: 'verify:score_arithmetic' } },
  endpoint: { verifier: { kind: 'endpoint', ref: `${upstream.url}/score` } }
}
const verifyUrl = `${arbiter.url}/v1/verify`
const batchUrl = `${arbiter.url}/v1/verify/batch`

console.log(`\nbatch of ${GROUP} vs single requests (items/s)`)
console.log(`${'work'.padEnd(10)} ${'singles x1'.padStart(11)} ${'singles x64'.padStart(12)} ${'batch x1'.padStart(10)} ${'vs x1'.padStart(7)} ${'vs x64'.padStart(7)}`)
const ratios: number[] = []
for (const [name, manifest] of Object.entries(works)) {
  const single = JSON.stringify({ manifest, task, trajectory: 'The answer is 4' })
  const batch = JSON.stringify({ manifest, items: Array.from({ length: GROUP }, (_, i) => ({ task, trajectory: i % 2 === 0 ? 'The answer is 4' : 'It is 5' })) })
  await load({ url: verifyUrl, body: single, connections: 8, durationS: 2 }) // warm workers and pools
  const one = await load({ url: verifyUrl, body: single, connections: 1 })
  const fanned = await load({ url: verifyUrl, body: single, connections: GROUP })
  const batched = await load({ url: batchUrl, body: batch, connections: 1 })
  const items = batched.rps * GROUP
  ratios.push(items / one.rps)
  console.log(`${name.padEnd(10)} ${one.rps.toFixed(0).padStart(11)} ${fanned.rps.toFixed(0).padStart(12)} ${items.toFixed(0).padStart(10)} ${(items / one.rps).toFixed(2).padStart(7)} ${(items / fanned.rps).toFixed(2).padStart(7)}`)
  if (one.errors + one.non2xx + fanned.errors + fanned.non2xx + batched.errors + batched.non2xx > 0) console.log(`  (${name}: errors or non-2xx answers in the run)`)
}
for (const [i, name] of Object.keys(works).entries()) goal(`${name}: batch items/s vs single requests/s`, ratios[i], 3)
await arbiter.stop()
await upstream.stop()
