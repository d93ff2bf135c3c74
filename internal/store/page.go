package store

// NewPage is the page of a list read one item past its limit: the first
// limit items, and when there are more, a cursor (cursor of the last item
// kept) for the page after. Items is never nil, so an empty page encodes
// as an empty list.
func NewPage[T any](items []T, limit int, cursor func(T) string) *Page[T] {
	p := &Page[T]{Items: items}
	if len(items) > limit {
		p.Items = items[:limit]
		p.NextCursor = cursor(items[limit-1])
	}
	if p.Items == nil {
		p.Items = []T{}
	}
	return p
}
