import t from 'tap'
import { exceedsDepth } from '../src/json-depth.js'

/** The definition, recursively: how many arrays/objects deep a value nests. */
function depthOf (value: unknown): number {
  if (value === null || typeof value !== 'object') return 0
  const children = Array.isArray(value) ? value : Object.values(value)
  return 1 + Math.max(0, ...children.map(depthOf))
}

t.test('the depth limit counts arrays and objects, exactly at the boundary', async (t) => {
  const cases: unknown[] = [
    1, 'text', null, {}, [], [[]], { a: 1 }, { a: [{ b: 1 }] }, { a: {}, b: [[[]]], c: 'x' },
    [1, [2, [3, [4]]], { deep: { deeper: { deepest: [null] } } }], { a: null, b: [null, {}] }
  ]
  for (const value of cases) {
    const depth = depthOf(value)
    t.equal(exceedsDepth(value, depth), false, `${JSON.stringify(value)} is ${depth} deep: within ${depth}`)
    if (depth > 0) t.equal(exceedsDepth(value, depth - 1), true, `${JSON.stringify(value)} exceeds ${depth - 1}`)
  }
})
