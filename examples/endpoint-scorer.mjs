// An example scoring endpoint for the `endpoint` kind: exact match of the last word of the
// flattened answer against task.reference. Start it with `node examples/endpoint-scorer.mjs`
// (PORT, default 9100) and point a manifest at http://127.0.0.1:9100/score.
// A task without a reference is answered 422: Arbiter turns that into a 502, never a 0.
import { createServer } from 'node:http'

function text (trajectory) {
  if (typeof trajectory === 'string') return trajectory
  if (Array.isArray(trajectory)) return trajectory.map(text).join('\n')
  if (trajectory !== null && typeof trajectory === 'object') return text(trajectory.content ?? trajectory.text ?? '')
  return String(trajectory ?? '')
}

const port = Number(process.env.PORT ?? 9100)
createServer((request, response) => {
  let body = ''
  request.on('data', (chunk) => { body += chunk })
  request.on('end', () => {
    const reply = (status, value) => {
      response.writeHead(status, { 'content-type': 'application/json' })
      response.end(JSON.stringify(value))
    }
    if (request.method !== 'POST' || request.url !== '/score') return reply(404, { error: 'POST /score' })
    let task, trajectory
    try { ({ task, trajectory } = JSON.parse(body)) } catch { return reply(400, { error: 'body is not JSON' }) }
    if (task?.reference === undefined) return reply(422, { error: 'this task has no reference; it cannot be scored' })
    const answer = text(trajectory).trim().split(/\s+/).pop() ?? ''
    const correct = answer === String(task.reference).trim()
    reply(200, { reward: correct ? 1 : 0, success: correct, message: correct ? 'exact match' : `expected ${task.reference}, got ${answer}` })
  })
}).listen(port, '127.0.0.1', () => console.log(`example scorer on http://127.0.0.1:${port}/score`))
