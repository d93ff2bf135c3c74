package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/heraldhooks/herald/internal/wire"
)

// ListOptions says how much of a list to fetch. The zero value fetches one
// page of the server's default size.
type ListOptions struct {
	// Limit is the most items to return; pages are followed until it is
	// reached or the list ends. 0 means one page of the server's default
	// size (or, with All, no bound).
	Limit int
	// All follows next_cursor to the end of the list.
	All bool
	// Cursor starts at a next_cursor from an earlier call.
	Cursor string
}

// Page is a list, or the part of it that was fetched.
type Page[T any] struct {
	// Data holds the items in the server's order.
	Data []T
	// RawData holds each item's JSON as received, in the same order.
	RawData []json.RawMessage
	// NextCursor continues the list after Data (ListOptions.Cursor); ""
	// when the list ended.
	NextCursor string
}

// MarshalJSON writes the page in the API's list shape,
// {"data": [...], "next_cursor": "..."}, each item as the server sent it.
func (p *Page[T]) MarshalJSON() ([]byte, error) {
	data := p.RawData
	if data == nil {
		data = []json.RawMessage{}
	}
	return json.Marshal(wire.List[json.RawMessage]{Data: data, NextCursor: p.NextCursor})
}

// list fetches pages of path with the filters in query, as opts asks.
func list[T any, PT interface {
	*T
	rawSetter
}](ctx context.Context, c *Client, path string, query url.Values, opts ListOptions) (*Page[T], error) {
	if opts.Limit < 0 {
		return nil, errors.New("list: limit must not be negative")
	}
	if query == nil {
		query = url.Values{}
	}
	out := &Page[T]{Data: []T{}, RawData: []json.RawMessage{}}
	cursor := opts.Cursor
	for {
		q := url.Values{}
		for k, v := range query {
			q[k] = v
		}
		switch {
		case opts.Limit > 0:
			q.Set("limit", strconv.Itoa(min(opts.Limit-len(out.Data), MaxPageSize)))
		case opts.All:
			q.Set("limit", strconv.Itoa(MaxPageSize))
		}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		raw, err := c.do(ctx, http.MethodGet, path, q, nil)
		if err != nil {
			return nil, err
		}
		var page wire.List[json.RawMessage]
		if err := json.Unmarshal(raw, &page); err != nil {
			return nil, errors.Join(errors.New("decode the answer to GET "+path), err)
		}
		for _, item := range page.Data {
			var v T
			if err := decodeInto("GET "+path, item, PT(&v)); err != nil {
				return nil, err
			}
			out.Data = append(out.Data, v)
			out.RawData = append(out.RawData, item)
		}
		cursor = page.NextCursor
		out.NextCursor = cursor
		done := cursor == "" || len(page.Data) == 0 ||
			(opts.Limit > 0 && len(out.Data) >= opts.Limit) ||
			(opts.Limit == 0 && !opts.All)
		if done {
			return out, nil
		}
	}
}
