"""Config values as plain Python (:func:`plain`) and as config source (:func:`as_code`), for the tools that write
child configs (the recipe and fine-tuning tools)."""


def plain(node):
    """``node`` as plain dicts, lists and tuples, without the ``_scope_`` keys mmengine adds to what an ``mmdet::`` /
    ``mmseg::`` base defines."""
    if isinstance(node, dict):
        return {k: plain(v) for k, v in node.items() if k != '_scope_'}
    if isinstance(node, (list, tuple)):
        return type(node)(plain(v) for v in node)
    return node


def as_code(value, indent=0):
    """``value`` as config source: dicts with identifier keys as ``dict(key=value)``, one key per line when the
    whole does not fit in a line; other values as their ``repr``."""
    if isinstance(value, dict) and value:
        named = all(isinstance(k, str) and k.isidentifier() for k in value)
        items = [(f'{k}=' if named else f'{k!r}: ') + as_code(v, indent + 4) for k, v in value.items()]
        opening, closing = ('dict(', ')') if named else ('{', '}')
        flat = opening + ', '.join(items) + closing
        if len(flat) + indent <= 100 and '\n' not in flat:
            return flat
        pad = ' ' * (indent + 4)
        return opening + '\n' + ',\n'.join(pad + item for item in items) + ',\n' + ' ' * indent + closing
    return repr(value)
