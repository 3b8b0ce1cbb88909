import t from 'tap'
import { execFile } from 'node:child_process'
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { promisify } from 'node:util'
import { LineBatch, createLogger } from '../src/logger.js'

const run = promisify(execFile)
const ROOT = fileURLToPath(new URL('..', import.meta.url))

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
  const dir = mkdtempSync(join(tmpdir(), 'arbiter-log-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const fd = openSync(join(dir, 'out.txt'), 'w')
  t.teardown(() => closeSync(fd))
  const lines = new LineBatch({
    write: (text) => { written.push(text); return true },
    flush: () => { flushes++ },
    flushSync: () => { syncFlushes++ }
  }, fd)
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
  t.equal(syncFlushes, 1, 'at exit the destination writes what it holds first')
  t.equal(written.length, 3, 'the last lines are not handed over (that could start a write the exit cuts short)')
  t.equal(written.join('') + readFileSync(join(dir, 'out.txt'), 'utf8'), sent.join(''), 'every line once, in order: the last ones written directly')
})

t.test('a process that exits, or simply ends, has written every line to stdout', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'arbiter-log-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const script = join(dir, 'log.mjs')
  // Fewer than 4096 characters, more than 4096 bytes: the last batch is multi-byte text.
  writeFileSync(script, `import { createLogger } from ${JSON.stringify(pathToFileURL(join(ROOT, 'dist/src/logger.js')).href)}
const log = createLogger('info')
for (let i = 0; i < 5; i++) log.info({ i, text: 'é✓'.repeat(300) }, 'line')
if (process.argv[2] === 'exit') process.exit(0)
`)
  for (const how of ['exit', 'end']) {
    const { stdout } = await run(process.execPath, [script, how])
    const logged = stdout.trim().split('\n').map((line) => JSON.parse(line) as { i: number, text: string })
    t.same(logged.map((line) => line.i), [0, 1, 2, 3, 4], `${how}: every line, in order`)
    t.ok(logged.every((line) => line.text === 'é✓'.repeat(300)), `${how}: intact`)
  }
})
