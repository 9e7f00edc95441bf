//! Which provider errors mean "the request is too long for the model's context": one table of
//! the shapes the APIs and the gateways in front of them send, so every one of them leads to
//! compaction instead of ending the run as a provider error.

use super::retry::FailureCategory;

/// A phrase (matched lowercased, anywhere in the error's message, its type and code
/// included) and who sends it.
pub struct OverflowShape {
    pub phrase: &'static str,
    pub sender: &'static str,
}

/// Every shape of a context overflow tollgate knows; `docs/reliability.md` lists them.
pub const SHAPES: &[OverflowShape] = &[
    OverflowShape {
        phrase: "prompt is too long",
        sender: "Anthropic (`prompt is too long: N tokens > M maximum`)",
    },
    OverflowShape {
        phrase: "exceed context limit",
        sender: "Anthropic (`input length and max_tokens exceed context limit: X + Y > Z`)",
    },
    OverflowShape {
        phrase: "context_length_exceeded",
        sender: "OpenAI, Azure OpenAI, Groq (the error's `code`)",
    },
    OverflowShape {
        phrase: "maximum context length",
        sender: "OpenAI, vLLM, OpenRouter, Mistral (`This model's maximum context length is N tokens`)",
    },
    OverflowShape {
        phrase: "context window",
        sender: "OpenAI Responses (`exceeds the context window of this model`)",
    },
    OverflowShape {
        phrase: "contextwindowexceeded",
        sender: "LiteLLM (`litellm.ContextWindowExceededError`)",
    },
    OverflowShape {
        phrase: "exceeds the available context size",
        sender: "llama.cpp server",
    },
    OverflowShape {
        phrase: "exceed_context_size",
        sender: "llama.cpp server (the error's `type`)",
    },
    OverflowShape {
        phrase: "context length",
        sender: "gateways and local servers (`context length exceeded`)",
    },
    OverflowShape {
        phrase: "input is too long",
        sender: "Amazon Bedrock through a gateway (`Input is too long for requested model`)",
    },
    OverflowShape {
        phrase: "too many tokens",
        sender: "gateways (`too many tokens in the request`)",
    },
];

/// Whether a final failure of `category` with `message` is a context overflow: a definite
/// answer of the server (not a connection or timeout failure) in one of the shapes above.
pub fn is_overflow(category: FailureCategory, message: &str) -> bool {
    let answered = matches!(
        category,
        FailureCategory::InvalidRequest
            | FailureCategory::Other
            | FailureCategory::ServerError
            // A gateway's 5xx whose body names the request invalid (`BadRequestError: This
            // model's maximum context length is …`).
            | FailureCategory::RejectedRequest
    );
    let message = message.to_ascii_lowercase();
    answered && SHAPES.iter().any(|shape| message.contains(shape.phrase))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_provider_and_gateway_shape_is_an_overflow() {
        let bodies = [
            "invalid_request_error: prompt is too long: 210345 tokens > 200000 maximum",
            "invalid_request_error: input length and `max_tokens` exceed context limit: 188240 + 21333 > 200000, decrease input length or `max_tokens` and try again",
            "invalid_request_error: Your input is larger than allowed [context_length_exceeded]",
            "invalid_request_error: This model's maximum context length is 128000 tokens. However, your messages resulted in 130511 tokens.",
            "invalid_request_error: Your input exceeds the context window of this model. Please adjust your input and try again.",
            "litellm.ContextWindowExceededError: litellm.BadRequestError: prompt has 9000 tokens",
            "BadRequestError: This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion).",
            "This endpoint's maximum context length is 8192 tokens. However, you requested about 9000 tokens. Please reduce the length of either one, or use the \"middle-out\" transform.",
            "exceed_context_size_error: the request exceeds the available context size, try increasing it",
            "Input is too long for requested model.",
        ];
        for body in bodies {
            assert!(is_overflow(FailureCategory::InvalidRequest, body), "{body}");
            assert!(
                is_overflow(FailureCategory::RejectedRequest, body),
                "{body}"
            );
        }
        // The same words after a dropped connection, and other refusals, are not.
        assert!(!is_overflow(FailureCategory::Connect, "prompt is too long"));
        assert!(!is_overflow(
            FailureCategory::InvalidRequest,
            "invalid_request_error: messages: roles must alternate"
        ));
    }
}
