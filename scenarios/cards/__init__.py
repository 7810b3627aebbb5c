"""Card velocity (`domain.type: cards`): card holders shopping at home, online and on
trips, with injected fraud. The scenario is `scenario.CardsScenario`; its knobs are in `config`."""
