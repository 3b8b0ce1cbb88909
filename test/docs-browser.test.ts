// The interactive API page in a real browser: headless Chromium (Debian's package, which
// .ci/run installs when missing) loads /docs, sends one real verification from the page's
// "try it", and the page shows the 200. The screenshot is kept as a test artefact.
import t from 'tap'
import { mkdirSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { chromium } from 'playwright-core'
import { buildTestApp, verifyBody } from './helpers/build-app.js'
import { json, startUpstream } from './helpers/upstream.js'

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'
const ARTIFACTS = fileURLToPath(new URL('./artifacts/', import.meta.url))

t.test('/docs runs a verification from the page', async (t) => {
  const upstream = await startUpstream(t, json(200, { reward: 0.75, message: 'from the docs page' }))
  const { app } = await buildTestApp(t)
  await app.listen({ host: '127.0.0.1', port: 0 })
  const base = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`

  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run']
  })
  t.teardown(async () => { await browser.close() })
  const page = await browser.newPage({ viewport: { width: 1280, height: 1600 } })
  await page.goto(`${base}/docs`)

  const operation = page.locator('#operations-verification-verify')
  await operation.locator('.opblock-summary').click()
  const editor = operation.locator('textarea.body-param__text')
  await editor.waitFor()
  await editor.fill(JSON.stringify(verifyBody('endpoint', `${upstream.url}/score`), null, 2))
  await operation.locator('button.execute').click()
  const status = operation.locator('.live-responses-table .response .response-col_status').first()
  await status.waitFor()
  t.match(await status.innerText(), /200/)
  t.match(await operation.locator('.live-responses-table').first().innerText(), /from the docs page/)
  t.equal(upstream.received.length, 1, 'the page sent a real verification')

  mkdirSync(ARTIFACTS, { recursive: true })
  await operation.locator('.live-responses-table').first().scrollIntoViewIfNeeded()
  await page.screenshot({ path: `${ARTIFACTS}docs.png` })
})
