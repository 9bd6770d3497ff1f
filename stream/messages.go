package stream

import "strings"

// Message is one turn of a conversation, for requests that carry more than
// one prompt (the proxy's). Role is "user" or "assistant"; the system
// prompt travels in Request.System.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Sampling holds the generation settings every dialect can express. Nil or
// empty fields are not sent.
type Sampling struct {
	Temperature *float64 `json:"temperature,omitempty"`
	TopP        *float64 `json:"top_p,omitempty"`
	Stop        []string `json:"stop,omitempty"`
}

// turns returns the request's conversation: Messages when set, else the
// single user Prompt. Consecutive turns of the same role are merged (the
// Messages and Gemini APIs want them to alternate); an empty role is a user
// turn.
func (r Request) turns() []Message {
	if len(r.Messages) == 0 {
		return []Message{{Role: "user", Content: r.Prompt}}
	}
	out := make([]Message, 0, len(r.Messages))
	for _, m := range r.Messages {
		role := strings.ToLower(m.Role)
		if role != "assistant" {
			role = "user"
		}
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Content += "\n\n" + m.Content
			continue
		}
		out = append(out, Message{Role: role, Content: m.Content})
	}
	return out
}

// addSampling puts the request's sampling settings into an OpenAI-style or
// Anthropic body; stopField names the stop list's field.
func addSampling(body map[string]any, stopField string, s Sampling) {
	if s.Temperature != nil {
		body["temperature"] = *s.Temperature
	}
	if s.TopP != nil {
		body["top_p"] = *s.TopP
	}
	if len(s.Stop) > 0 {
		body[stopField] = s.Stop
	}
}
