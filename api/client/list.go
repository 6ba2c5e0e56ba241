package client

import (
	"context"
	"encoding/json"
	"net/url"
)

// Object is a record of any list, as decoded JSON.
type Object = map[string]any

// Iterator walks a list page by page, following meta.next_cursor.
type Iterator[T any] struct {
	c     *Client
	path  string
	query url.Values
	page  []T
	i     int
	next  *string
	done  bool
	err   error
	item  T
	meta  map[string]any
}

// List returns an iterator over the list at path (for example "/plans" or
// "/pixel-rollups") with query (filters and limit; nil for none).
func List[T any](c *Client, path string, query url.Values) *Iterator[T] {
	q := url.Values{}
	for k, v := range query {
		q[k] = append([]string(nil), v...)
	}
	return &Iterator[T]{c: c, path: path, query: q}
}

// Next advances to the next item, fetching the next page when needed. It returns false
// at the end of the list or on an error (see Err).
func (it *Iterator[T]) Next(ctx context.Context) bool {
	for it.i >= len(it.page) {
		if it.done || it.err != nil {
			return false
		}
		if it.next != nil {
			it.query.Set("cursor", *it.next)
			it.query.Del("offset") // a cursor says where the next page starts; the API refuses both
		}
		var pg struct {
			Data []T `json:"data"`
			Meta struct {
				NextCursor *string `json:"next_cursor"`
			} `json:"meta"`
		}
		var whole struct {
			Meta map[string]any `json:"meta"`
		}
		var raw json.RawMessage
		if err := it.c.Get(ctx, it.path, it.query, &raw); err != nil {
			it.err = err
			return false
		}
		if err := json.Unmarshal(raw, &pg); err != nil {
			it.err = err
			return false
		}
		if err := json.Unmarshal(raw, &whole); err == nil {
			it.meta = whole.Meta
		}
		it.page, it.i, it.next = pg.Data, 0, pg.Meta.NextCursor
		it.done = it.next == nil || *it.next == ""
	}
	it.item = it.page[it.i]
	it.i++
	return true
}

// Item is the current item.
func (it *Iterator[T]) Item() T { return it.item }

// Meta is the meta object of the last page fetched (nil before the first): a list's
// own members beside next_cursor, such as GET /rejections' counts.
func (it *Iterator[T]) Meta() map[string]any { return it.meta }

// Err is the error that ended the walk, if any.
func (it *Iterator[T]) Err() error { return it.err }

// All collects every item of the list.
func (it *Iterator[T]) All(ctx context.Context) ([]T, error) {
	var out []T
	for it.Next(ctx) {
		out = append(out, it.Item())
	}
	return out, it.Err()
}
