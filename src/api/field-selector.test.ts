import { escapeFieldSelectorValue, fieldEquals } from './field-selector.ts';

describe('escapeFieldSelectorValue (apimachinery fields.EscapeValue)', () => {
  test.each([
    ['plain', 'plain'],
    ['', ''],
    ['a\\b', 'a\\\\b'],
    ['reader,writer', 'reader\\,writer'],
    ['a=b', 'a\\=b'],
    ['x,metadata.name!=x', 'x\\,metadata.name!\\=x'],
    // The backslash is escaped once, and not again after `,` and `=` are.
    ['\\,', '\\\\\\,'],
    ['\\=', '\\\\\\='],
    ['a\\,b=c\\\\', 'a\\\\\\,b\\=c\\\\\\\\'],
    [',,==', '\\,\\,\\=\\='],
    // Everything else, `!` and `:` included, is left as it is.
    ['system:controller:x!y', 'system:controller:x!y'],
  ])('%j → %j', (value, escaped) => {
    expect(escapeFieldSelectorValue(value)).toBe(escaped);
  });
});

test('fieldEquals escapes the value, not the field', () => {
  expect(fieldEquals('metadata.name', 'reader,writer')).toBe('metadata.name=reader\\,writer');
  expect(fieldEquals('spec.nodeName', 'node-1')).toBe('spec.nodeName=node-1');
});
