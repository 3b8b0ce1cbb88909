import t from 'tap'
import { Writable } from 'node:stream'
import { LineBatch, createLogger } from '../src/logger.js'

t.test('header secrets are redacted if a header object is ever logged', async (t) => {
  let text = ''
  const destination = new Writable({ write (chunk: Buffer, _encoding, callback) { text += chunk.toString(); callback() } })
  const log = createLogger('debug', { destination })
  log.info({ req: { headers: { authorization: 'Bearer SECRET-1', 'x-api-key': 'SECRET-2', accept: 'application/json' } } }, 'debug line')
  log.info({ headers: { authorization: 'Bearer SECRET-3' } }, 'upstream headers')
  t.notMatch(text, /SECRET-/)
  t.match(text, /"authorization":"\[redacted\]"/)
  t.match(text, /"accept":"application\/json"/, 'other headers stay')
})

t.test('log lines reach the destination in order, about 4 KiB at a time, and all of them on flush', async (t) => {
  const written: string[] = []
  let flushes = 0
  let syncFlushes = 0
  const lines = new LineBatch({
    write: (text) => { written.push(text); return true },
    flush: () => { flushes++ },
    flushSync: () => { syncFlushes++ }
  })
  const sent = Array.from({ length: 100 }, (_, i) => `${String(i).padStart(3, '0')} ${'x'.repeat(95)}\n`)
  for (const line of sent.slice(0, 40)) lines.write(line)
  t.same(written, [], 'nothing is written before 4 KiB are gathered')
  for (const line of sent.slice(40, 90)) lines.write(line)
  t.equal(written.length, 2, 'two batches of 41 lines of 100 characters')
  t.equal(written[0], sent.slice(0, 41).join(''))
  lines.flush()
  t.equal(flushes, 1)
  t.equal(written.join(''), sent.slice(0, 90).join(''), 'a flush hands over the rest, in order')
  lines.flush()
  t.equal(written.length, 3, 'an empty flush writes nothing')
  for (const line of sent.slice(90)) lines.write(line)
  lines.flushSync()
  t.equal(syncFlushes, 1)
  t.equal(written.join(''), sent.join(''), 'every line once, in order')
})
