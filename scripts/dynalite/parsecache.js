// Remembers what dynalite's expression parsers made of an expression, so an
// expression seen before is not parsed again.
//
// dynalite parses every ConditionExpression, UpdateExpression,
// KeyConditionExpression, FilterExpression and ProjectionExpression of every
// call with a generated PEG parser, and that parsing is about half of what it
// does under fleetq's suites: a program sends the same few dozen expressions
// over and over with other values. A parse's answer is a tree in which the
// expression's attribute names are resolved to their strings and each value
// placeholder to the very value object the request carries; its checks look at
// the names, at each value's type, and, for BETWEEN and attribute_type, at the
// values themselves.
//
// So a successful parse is remembered under the parser, the expression, the
// request's ExpressionAttributeNames, the type of each of its
// ExpressionAttributeValues and whether it is a key condition. It is kept as a
// template whose values are placeholders; a later parse under the same key
// answers a fresh copy of the template with the request's own values put
// back, and marks as used the names and values the first parse used
// (dynalite refuses a request that defines one it does not use). Expressions
// whose checks read values (BETWEEN, attribute_type) and parses that refuse
// the expression (a thrown error or a message) are never remembered: they are
// parsed each time, as dynalite does.
'use strict'

const MAX_ENTRIES = 10000
const VALUE_TYPES = ['S', 'N', 'B', 'NULL', 'BOOL', 'SS', 'NS', 'BS', 'L', 'M']
const READS_VALUES = /between|attribute_type/i

// install makes each of dynalite's expression parsers remember its answers.
function install () {
  for (const name of ['conditionParser', 'updateParser', 'projectionParser']) {
    const parser = require('dynalite/db/' + name)
    parser.parse = remembering(name, parser.parse)
  }
}

// remembering wraps one parser's parse(input, { context }).
function remembering (name, parse) {
  const cache = new Map()
  return function (input, options) {
    const context = options && options.context
    if (!context || typeof input !== 'string' || READS_VALUES.test(input)) {
      return parse(input, options)
    }
    const names = context.attrNames || {}
    const values = context.attrVals || {}
    const key = JSON.stringify([name, Boolean(context.isKeyCondition), input, namesOf(names), typesOf(values)])
    const hit = cache.get(key)
    if (hit) {
      markUsed(context, hit)
      return fill(hit.template, values)
    }
    // The parse runs with every name and value marked unused, to learn which
    // it uses whatever earlier parses of the same request used.
    const unused = { unusedAttrNames: Object.fromEntries(Object.keys(names).map((n) => [n, true])), unusedAttrVals: Object.fromEntries(Object.keys(values).map((v) => [v, true])) }
    const result = parse(input, Object.assign({}, options, { context: Object.assign({}, context, unused) })) // throws, or answers a string, when the expression is refused
    const usedNames = Object.keys(names).filter((n) => !(n in unused.unusedAttrNames))
    const usedValues = Object.keys(values).filter((v) => !(v in unused.unusedAttrVals))
    markUsed(context, { usedNames, usedValues })
    const template = result !== null && typeof result === 'object' ? placeholders(result, values) : undefined
    if (template !== undefined) {
      if (cache.size >= MAX_ENTRIES) cache.clear()
      cache.set(key, { template, usedNames, usedValues })
    }
    return result
  }
}

// markUsed takes the names and values a parse used off the request's unused ones.
function markUsed (context, { usedNames, usedValues }) {
  for (const n of usedNames) if (context.unusedAttrNames) delete context.unusedAttrNames[n]
  for (const v of usedValues) if (context.unusedAttrVals) delete context.unusedAttrVals[v]
}

// namesOf lists the request's names in order (a request's JSON may carry them
// in any order).
function namesOf (names) {
  return Object.keys(names).sort().map((k) => [k, names[k]])
}

// typesOf lists each value's placeholder with its type, as the parsers see it.
function typesOf (values) {
  return Object.keys(values).sort().map((k) => {
    const v = values[k]
    const t = v && typeof v === 'object' ? VALUE_TYPES.find((type) => v[type] != null) : undefined
    return [k, t || null]
  })
}

// placeholders copies a parse's tree with each of the request's value objects
// replaced by { placeholder }, or answers undefined when the tree holds
// anything but plain objects, arrays and scalars.
function placeholders (node, values) {
  const byObject = new Map(Object.keys(values).map((k) => [values[k], k]))
  let plain = true
  const copy = (n) => {
    if (n === null || typeof n !== 'object') {
      if (typeof n === 'function' || typeof n === 'symbol') plain = false
      return n
    }
    if (byObject.has(n)) return { [PLACEHOLDER]: byObject.get(n) }
    if (Array.isArray(n)) return n.map(copy)
    const proto = Object.getPrototypeOf(n)
    if (proto !== Object.prototype && proto !== null) {
      plain = false
      return n
    }
    const out = proto === null ? Object.create(null) : {}
    for (const k of Object.keys(n)) out[k] = copy(n[k])
    return out
  }
  const template = copy(node)
  return plain ? template : undefined
}

const PLACEHOLDER = Symbol('value placeholder')

// fill copies a template with the request's value objects in place of its
// placeholders.
function fill (node, values) {
  if (node === null || typeof node !== 'object') return node
  if (Array.isArray(node)) return node.map((n) => fill(n, values))
  if (PLACEHOLDER in node) return values[node[PLACEHOLDER]]
  const out = Object.getPrototypeOf(node) === null ? Object.create(null) : {}
  for (const k of Object.keys(node)) out[k] = fill(node[k], values)
  return out
}

module.exports = { install }
